// A second caller with the official A2A JavaScript client (@a2a-js/sdk), for
// tests/test_a2a_isolation.py: it holds its own token and another caller's task and context
// ids, and tries every method on them.
// Usage: node a2a_intruder.mjs <server url> <sdk dir> <token> <task id> <context id> <hook url>
// Prints one JSON object: each attempt's outcome ("ok: ..." or "error: <message>").
import { randomUUID } from "node:crypto";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [url, sdk, token, taskId, contextId, hookUrl] = process.argv.slice(2);
const load = (path) => import(pathToFileURL(join(sdk, "dist", path)).href);
const { Role } = await load("index.js");
const { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory } = await load("client/index.js");

const withToken = (input, init = {}) => {
  const headers = new Headers(init.headers);
  headers.set("authorization", `Bearer ${token}`);
  return fetch(input, { ...init, headers });
};
const factory = new ClientFactory(
  ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ fetchImpl: withToken })],
  }),
);
const client = await factory.createFromUrl(url);

async function attempt(call) {
  try {
    const result = await call();
    return `ok: ${JSON.stringify(result ?? null)}`;
  } catch (error) {
    return `error: ${error?.message ?? error}`;
  }
}

const message = (ids) => ({
  messageId: randomUUID(),
  role: Role.ROLE_USER,
  parts: [{ content: { $case: "text", value: "js intruder" }, metadata: undefined, filename: "", mediaType: "" }],
  contextId: ids.contextId ?? "",
  taskId: ids.taskId ?? "",
  metadata: undefined,
  extensions: [],
  referenceTaskIds: [],
});

const out = {};
out.list = await attempt(async () => (await client.listTasks({ tenant: "", contextId: "", pageSize: 100 })).tasks.map((t) => t.id));
out.get = await attempt(() => client.getTask({ tenant: "", id: taskId }));
out.cancel = await attempt(() => client.cancelTask({ tenant: "", id: taskId, metadata: undefined }));
out.pushList = await attempt(() => client.listTaskPushNotificationConfig({ tenant: "", taskId, pageSize: 0, pageToken: "" }));
out.pushSet = await attempt(() =>
  client.createTaskPushNotificationConfig({ tenant: "", taskId, id: "", url: hookUrl, token: "js", authentication: undefined }),
);
out.resubscribe = await attempt(async () => {
  for await (const event of client.resubscribeTask({ tenant: "", id: taskId })) return event.payload.$case;
  return "ended";
});
out.reply = await attempt(() =>
  client.sendMessage({ tenant: "", message: message({ taskId, contextId }), configuration: undefined, metadata: undefined }),
);
out.unknownGet = await attempt(() => client.getTask({ tenant: "", id: randomUUID() }));
console.log(JSON.stringify(out));
