"""``/api/agui`` driven by the protocol's own TypeScript client, ``@ag-ui/client``'s
``HttpAgent``, in Node (tests/agui_client.mjs), against the scripted model: every event valid
by the protocol's schemas, ``verifyEvents`` passing, a second turn, a front-end tool round
trip, ``abortRun()`` then a new run on the same thread."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.testing import ScriptedLLMServer, call, stall, text, tool_calls
from tests.npm_tools import NPM_DIR, node_env, npm_bin
from tests.web_ui_helpers import WebApp

pytestmark = pytest.mark.e2e

SCRIPT = Path(__file__).with_name("agui_client.mjs")


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory, llm: ScriptedLLMServer) -> Iterator[WebApp]:
    web = WebApp(tmp_path_factory.mktemp("agui-node"), llm.base_url).start()
    yield web
    web.stop()


def test_http_agent_in_node(app: WebApp, llm: ScriptedLLMServer) -> None:
    npm_bin("esbuild")  # fails naming scripts/setup-npm-tools.sh when the npm tools are missing
    llm.push(
        tool_calls(call("bash", {"command": "echo from-node"}), content="Running it."),
        text("Hello from the agent."),
        text("Second turn."),
        tool_calls(call("pick_color", {"choices": ["red", "blue"]}), content="Let me ask."),
        text("You picked blue."),
        stall(text("Thinking about it for a long while"), after=2, seconds=30),
        text("After the abort."),
    )
    done = subprocess.run(
        ["node", str(SCRIPT)],
        capture_output=True,
        text=True,
        timeout=120,
        env=node_env(
            AGUI_URL=f"{app.base}/api/agui", AGUI_TOKEN=app.token or "", NPM_TOOLS=str(NPM_DIR)
        ),
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    runs = {r["name"]: r for r in report["runs"]}
    for run in report["runs"]:
        assert run["invalid"] == [], run["name"]
        assert run["verified"] is True, (run["name"], run["verified"])
        assert run["types"][0] == "RUN_STARTED", run["name"]
        if run["name"] != "aborted":
            assert run["error"] is None and run["types"][-1] == "RUN_FINISHED", run
    assert runs["first"]["result"] == "Hello from the agent."
    assert runs["second"]["result"] == "Second turn."
    assert runs["tool result"]["result"] == "You picked blue."
    assert runs["after abort"]["result"] == "After the abort."
    paused = runs["tool call"]["events"][-1]
    assert paused["type"] == "RUN_FINISHED" and paused["outcome"]["pendingToolCallIds"]
    # One assistant message per turn on the client: its text and its call together.
    messages = report["messages"]
    asked = next(m for m in messages if m.get("content") == "Let me ask.")
    assert [c["function"]["name"] for c in asked["toolCalls"]] == ["pick_color"]
    ran = next(m for m in messages if m.get("content") == "Running it.")
    assert [c["function"]["name"] for c in ran["toolCalls"]] == ["bash"]
    # The model saw the front-end tool, the context, and the result; the prompt ran once.
    offered = [t["function"]["name"] for t in llm.requests[3].tools or []]
    assert "pick_color" in offered and "bash" in offered
    assert "checkout" in json.dumps(llm.requests[3].messages)
    continued = json.dumps(llm.requests[4].messages)
    assert continued.count("order socks") == 1 and "blue" in continued
    # The aborted run's model call was cut; the next run went straight on (no 409).
    assert runs["after abort"]["ms"] < 5000
    assert llm.remaining == 0


def test_the_docs_client_example_runs(app: WebApp, llm: ScriptedLLMServer, tmp_path: Path) -> None:
    """docs/web-ui.md's AG-UI example, as written, against the server: a front-end tool round
    trip, then the answer printed."""
    npm_bin("esbuild")
    page = (Path(__file__).resolve().parent.parent / "docs" / "web-ui.md").read_text()
    section = page.split("## AG-UI endpoint", 1)[1]
    example = section.split("```javascript\n", 1)[1].split("```", 1)[0]
    (tmp_path / "node_modules").symlink_to(NPM_DIR / "node_modules")
    (tmp_path / "agui-demo.mjs").write_text(example)
    llm.push(
        tool_calls(call("pick_colour", {"choices": ["teal", "red"]}), content="Asking."),
        text("Teal: calm and fresh, fit for a paint shop."),
    )
    done = subprocess.run(
        ["node", "agui-demo.mjs"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=node_env(OPENMANUS_URL=app.base, OPENMANUS_WEB_TOKEN=app.token or ""),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Teal: calm and fresh, fit for a paint shop."
    sent = json.dumps(llm.requests[-1].messages)
    assert "teal" in sent and "ACME, a paint shop" in sent
