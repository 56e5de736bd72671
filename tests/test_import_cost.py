"""What a run imports: loguru and the IDNA codec only when used.

Each of these costs every process that imports the framework, so a library run that logs
nothing and talks to a plain host must not pay for them. (The framework's own modules are
imported at the top of the modules that use them; only optional extras and these load
late.) The runs here are real: fresh interpreters, an agent talking to the scripted server
over HTTP.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.testing import ScriptedLLMServer, call, text, tool_calls

ROOT = Path(__file__).resolve().parent.parent
LAZY = ("loguru", "encodings.idna")

# A library program: settings built in code, one tool call, then an answer.
_RUN = """
import asyncio, json, sys
from app.logger import define_log_level
from app.config import LLMSettings
from app.agent.toolcall import ToolCallAgent
from app.llm import LLM
from app.tool.terminate import Terminate
from app.tool.tool_collection import ToolCollection
from app.tool.base import BaseTool

class Echo(BaseTool):
    name: str = "echo"
    description: str = "Return the text."
    parameters: dict = {{"type": "object", "properties": {{"text": {{"type": "string"}}}}}}

    async def execute(self, text: str) -> str:
        return text

define_log_level({levels})
settings = LLMSettings(model="m", base_url={url!r}, api_key="sk-test-0123456789", max_retries=0)
agent = ToolCallAgent(
    llm=LLM.create(llm_config=settings),
    available_tools=ToolCollection(Echo(), Terminate()),
    max_steps=3,
)
seen = []
if {listen}:
    agent.events.subscribe(lambda event: seen.append(event.kind))
result = asyncio.run(agent.run("say hi"))
print(json.dumps({{
    "answer": result.final_answer,
    "events": seen,
    "loaded": [name for name in {lazy!r} if name in sys.modules],
}}))
"""


def _run(server: ScriptedLLMServer, *, levels: str, listen: bool) -> tuple[dict[str, object], str]:
    server.push(tool_calls(call("echo", {"text": "hi"})), text("hi"))
    code = _RUN.format(url=server.base_url, levels=levels, listen=listen, lazy=LAZY)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOGURU")}
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


@pytest.mark.e2e
def test_a_quiet_unwatched_run_imports_none_of_them(llm_server: ScriptedLLMServer) -> None:
    out, stderr = _run(llm_server, levels='"ERROR", "OFF"', listen=False)
    assert out["answer"] == "hi"
    assert out["loaded"] == []
    assert stderr == ""


@pytest.mark.e2e
def test_a_listener_gets_every_event_and_loguru_stays_out(llm_server: ScriptedLLMServer) -> None:
    out, _ = _run(llm_server, levels='"ERROR", "OFF"', listen=True)
    assert out["answer"] == "hi"
    events = out["events"]
    assert isinstance(events, list)
    assert events[0] == "run_started" and events[-1] == "run_finished"
    assert {"step_started", "tool_call", "tool_result", "usage"} <= set(events)
    assert out["loaded"] == []


@pytest.mark.e2e
def test_a_run_that_logs_loads_loguru_and_logs(llm_server: ScriptedLLMServer) -> None:
    out, stderr = _run(llm_server, levels='"INFO", "OFF"', listen=False)
    assert out["answer"] == "hi"
    assert out["loaded"] == ["loguru"]
    # The records name the code that logged them, not the logger's stand-in.
    assert "Executing step 1/3" in stderr
    assert "app.agent.base:_run:" in stderr and "app.logger" not in stderr
