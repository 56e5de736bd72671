// The official A2A JavaScript client (@a2a-js/sdk) driving the A2A server, for tests/test_a2a.py.
// Usage: node a2a_client.mjs <server url> <sdk dir>. Prints one JSON object: what it saw.
import { randomUUID } from "node:crypto";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [url, sdk] = process.argv.slice(2);
const load = (path) => import(pathToFileURL(join(sdk, "dist", path)).href);
const { Role, TaskState } = await load("index.js");
const { ClientFactory } = await load("client/index.js");

const client = await new ClientFactory().createFromUrl(url);
const stateName = (s) => TaskState[s];
const textOf = (parts) =>
  (parts ?? []).map((p) => (p.content?.$case === "text" ? p.content.value : "")).join("");

function message(text, ids = {}) {
  return {
    messageId: randomUUID(),
    role: Role.ROLE_USER,
    parts: [{ content: { $case: "text", value: text }, metadata: undefined, filename: "", mediaType: "" }],
    contextId: ids.contextId ?? "",
    taskId: ids.taskId ?? "",
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

const request = (msg) => ({ tenant: "", message: msg, configuration: undefined, metadata: undefined });

function summary(task) {
  return {
    id: task.id,
    contextId: task.contextId,
    state: stateName(task.status?.state),
    question: textOf(task.status?.message?.parts),
    answer: (task.artifacts ?? []).map((a) => textOf(a.parts)).join(""),
  };
}

async function send(text, ids) {
  const result = await client.sendMessage(request(message(text, ids)));
  if (!("id" in result) || !("status" in result)) throw new Error("expected a task, got a message");
  return summary(result);
}

async function stream(text, ids, onEvent) {
  const events = [];
  for await (const event of client.sendMessageStream(request(message(text, ids)))) {
    const payload = event.payload;
    const value = payload.value;
    const entry = { kind: payload.$case };
    if (payload.$case === "task") Object.assign(entry, summary(value));
    if (payload.$case === "statusUpdate") {
      entry.state = stateName(value.status?.state);
      entry.text = textOf(value.status?.message?.parts);
      entry.meta = value.status?.message?.metadata ?? null;
      entry.taskId = value.taskId;
      entry.contextId = value.contextId;
    }
    if (payload.$case === "artifactUpdate") {
      entry.name = value.artifact?.name;
      entry.text = textOf(value.artifact?.parts);
    }
    events.push(entry);
    if (onEvent && (await onEvent(entry))) break;
  }
  return events;
}

const out = { card: client.agentCard ?? null };
out.send = await send("js send");
out.second = await send("js second turn", { contextId: out.send.contextId });
out.stream = await stream("js stream");
out.ask = await stream("js ask");
const asked = out.ask.find((e) => e.state === "TASK_STATE_INPUT_REQUIRED");
out.answered = await send("green", { taskId: asked.taskId, contextId: asked.contextId });
let canceled = null;
const started = Date.now();
out.cancelStream = await stream("js slow", undefined, async (entry) => {
  if (entry.kind === "task" && canceled === null) {
    canceled = summary(await client.cancelTask({ tenant: "", id: entry.id, metadata: undefined }));
    return true;
  }
  return false;
});
out.canceled = canceled;
out.cancelSeconds = (Date.now() - started) / 1000;
out.afterCancel = summary(await client.getTask({ tenant: "", id: canceled.id }));
console.log(JSON.stringify(out));
