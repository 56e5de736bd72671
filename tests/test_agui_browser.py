"""``/api/agui`` from a page in real headless Chromium: ``@ag-ui/client`` (bundled for the
browser by esbuild) runs in the web UI's own origin, logged in by its cookie, against the
scripted model: a turn, a front-end tool the page itself answers, ``abortRun()`` and a new run.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.testing import ScriptedLLMServer, call, stall, text, tool_calls
from tests.npm_tools import NPM_DIR, node_env, npm_bin
from tests.test_web_ui import CHROMIUM, browser, expect  # noqa: F401 (the browser fixture)
from tests.web_ui_helpers import WebApp

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium package"),
]

ENTRY = """
export { HttpAgent } from "@ag-ui/client";
export { EventSchemas } from "@ag-ui/core/schemas";
"""

#: Runs in the page: three runs on one thread, every event checked by the protocol's schemas.
SCENARIO = """async () => {
  const { HttpAgent, EventSchemas } = window.AGUI;
  const agent = new HttpAgent({ url: "/api/agui", threadId: "page-thread" });
  const invalid = [];
  const runs = [];
  async function run(name, params, onEvent) {
    const types = [];
    let error = null, result;
    try {
      const out = await agent.runAgent(params, { onEvent({ event }) {
        if (!EventSchemas.safeParse(event).success) invalid.push(event.type);
        types.push(event.type);
        onEvent?.(event);
      } });
      result = out.result;
    } catch (e) { error = String(e); }
    runs.push({ name, types, result, error });
  }
  const picker = { name: "read_field", description: "Read a field of the page.",
    parameters: { type: "object", properties: { field: { type: "string" } } } };
  const input = document.createElement("input");
  input.id = "colour";
  input.value = "teal";
  document.body.append(input);
  agent.addMessage({ id: "p1", role: "user", content: "what colour is set?" });
  const context = [{ description: "app", value: "paint shop" }];
  await run("tool call", { tools: [picker], context });
  const pending = agent.messages.at(-1).toolCalls[0];
  const field = JSON.parse(pending.function.arguments).field;
  agent.addMessage({ id: "p2", role: "tool", toolCallId: pending.id,
    content: document.getElementById(field).value });
  await run("tool result", { tools: [picker] });
  agent.addMessage({ id: "p3", role: "user", content: "slow one" });
  await run("aborted", {}, (e) => { if (e.type === "TEXT_MESSAGE_CONTENT") agent.abortRun(); });
  agent.addMessage({ id: "p4", role: "user", content: "next" });
  await run("after abort", {});
  return { runs, invalid, messages: agent.messages };
}"""


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory, llm: ScriptedLLMServer) -> Iterator[WebApp]:
    web = WebApp(tmp_path_factory.mktemp("agui-page"), llm.base_url).start()
    yield web
    web.stop()


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("agui-bundle") / "agui.js"
    subprocess.run(
        [
            str(npm_bin("esbuild")),
            "--bundle",
            "--format=iife",
            "--global-name=AGUI",
            "--platform=browser",
            "--log-level=warning",
            f"--outfile={out}",
        ],
        input=ENTRY,
        text=True,
        check=True,
        cwd=NPM_DIR,
        env=node_env(),
        timeout=120,
    )
    return out


def test_http_agent_in_chromium(browser, app, llm, bundle) -> None:  # noqa: F811
    llm.push(
        tool_calls(call("read_field", {"field": "colour"}), content="Let me look."),
        text("The colour is teal."),
        stall(text("Thinking about it for a long while"), after=2, seconds=30),
        text("Ready again."),
    )
    context = browser.new_context(bypass_csp=True)  # the bundle is injected as a script
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(app.login_url)  # the token becomes the cookie the page's fetches carry
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    page.add_script_tag(path=str(bundle))
    report = page.evaluate(SCENARIO)
    context.close()
    assert not errors, errors
    assert report["invalid"] == []
    runs = {r["name"]: r for r in report["runs"]}
    for name in ("tool call", "tool result", "after abort"):
        assert runs[name]["error"] is None, runs[name]
        assert runs[name]["types"][0] == "RUN_STARTED" and runs[name]["types"][-1] == "RUN_FINISHED"
    assert "TOOL_CALL_START" in runs["tool call"]["types"]
    assert runs["tool result"]["result"] == "The colour is teal."
    assert runs["after abort"]["result"] == "Ready again."
    asked = next(m for m in report["messages"] if m.get("content") == "Let me look.")
    assert asked["toolCalls"][0]["function"]["name"] == "read_field"  # one message, text + call
    assert "teal" in str(llm.requests[1].messages) and "paint shop" in str(llm.requests[0].messages)
    assert llm.remaining == 0
