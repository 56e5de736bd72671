// Drives /api/agui with the protocol's own client, @ag-ui/client's HttpAgent (run by
// tests/test_agui_client.py against the scripted model). Every event is checked against the
// protocol's schemas and re-checked with verifyEvents; the report is one JSON line on stdout.
// Environment: AGUI_URL, AGUI_TOKEN, NPM_TOOLS (the .npm-tools directory).
import { createRequire } from "node:module";

const require = createRequire(`${process.env.NPM_TOOLS}/package.json`);
const { HttpAgent, verifyEvents } = require("@ag-ui/client");
const { EventSchemas } = require("@ag-ui/core/schemas");
const { from, lastValueFrom, toArray } = require("rxjs");

const headers = { Authorization: `Bearer ${process.env.AGUI_TOKEN}` };
const agent = new HttpAgent({ url: process.env.AGUI_URL, headers, threadId: "node-thread" });
const report = { runs: [] };
let n = 0;

function say(text) {
  agent.addMessage({ id: `user-${++n}`, role: "user", content: text });
}

async function run(name, params = {}, extra = {}) {
  const events = [];
  const invalid = [];
  const started = Date.now();
  let error = null;
  let result;
  try {
    const out = await agent.runAgent(params, {
      onEvent({ event }) {
        const checked = EventSchemas.safeParse(event);
        if (!checked.success) invalid.push(`${event.type}: ${checked.error}`);
        events.push(event);
        extra.onEvent?.(event);
      },
    });
    result = out.result;
  } catch (e) {
    error = String(e?.name ?? "") + ": " + String(e?.message ?? e);
  }
  // The stream as received, through the protocol's verifier once more.
  let verified = null;
  try {
    await lastValueFrom(from(events).pipe(verifyEvents(false), toArray()), { defaultValue: [] });
    verified = true;
  } catch (e) {
    verified = String(e?.message ?? e);
  }
  const types = events.map((e) => e.type);
  const record = { name, types, events, invalid, result, error, verified };
  record.ms = Date.now() - started;
  report.runs.push(record);
  return record;
}

const picker = {
  name: "pick_color",
  description: "Ask the user to pick a colour in the app.",
  parameters: {
    type: "object",
    properties: { choices: { type: "array", items: { type: "string" } } },
    required: ["choices"],
  },
};

say("say hi");
await run("first");
say("again");
await run("second");

say("order socks");
const paused = await run("tool call", {
  tools: [picker],
  context: [{ description: "The page the user is on", value: "checkout" }],
});
const call = paused.events.find((e) => e.type === "TOOL_CALL_START");
// The front end runs its tool and posts the result in the next run.
agent.addMessage({ id: "tool-result-1", role: "tool", toolCallId: call.toolCallId, content: "blue" });
await run("tool result", { tools: [picker] });

say("slow one");
await run("aborted", {}, {
  onEvent(event) {
    if (event.type === "TEXT_MESSAGE_CONTENT") agent.abortRun();
  },
});
say("after the abort");
await run("after abort");

report.messages = agent.messages;
process.stdout.write(JSON.stringify(report) + "\n");
