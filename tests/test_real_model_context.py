"""Context that holds on a real 2,048-token window (issue 29, items 1 and 4), on llama-cpp-python
with SmolLM2 and ``chatml-function-calling``.

The recording proxy forces the tool the test needs (``tool_choice`` naming it), so what is under
test is what the framework does with the real server's answers and refusals, not the model's
choices. The model's own words only matter as the summaries it writes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.agent.manus import Manus
from app.agent.result import StopReason
from app.agent.toolcall import ToolCallAgent
from app.config import CompactionSettings
from app.events import Compacted
from app.llm import LLM
from app.prompt.compaction import SUMMARY_INTRO
from app.schema import Message, ToolCall
from app.testing.proxy import ProxiedExchange, RecordingProxy
from app.tool.base import BaseTool
from app.tool.terminate import Terminate
from app.tool.tool_collection import ToolCollection
from tests.real_model_fixtures import LlamaPool, real_settings

pytestmark = pytest.mark.real_model

WINDOW = 2048
#: What llama.cpp's threads manage on a busy 2-core machine is far below their usual pace.
PATIENT = 600.0


class RecordReading(BaseTool):
    """A tool with a short output: with ``chatml-function-calling`` the server leaves tool
    outputs out of the prompt, so the conversation grows by the model's calls alone."""

    name: str = "record_reading"
    description: str = "Record one sensor reading in the log book, with a short remark."
    parameters: dict | None = {
        "type": "object",
        "properties": {
            # Bounded: the server's grammar obeys maxLength (it ignores max_tokens for calls).
            "sensor": {"type": "string", "maxLength": 30},
            "reading": {"type": "string", "maxLength": 80},
        },
        "required": ["sensor", "reading"],
    }

    async def execute(self, sensor: str, reading: str = "") -> str:
        return "recorded"


class RunCode(BaseTool):
    name: str = "run_code"
    description: str = "Run Python code."
    parameters: dict | None = {
        "type": "object",
        "properties": {"code": {"type": "string"}},
        "required": ["code"],
    }

    async def execute(self, code: str) -> str:
        return "ran"


def forcing(tool: str):
    """A proxy rewrite making the server call ``tool`` whenever tools are offered."""

    def rewrite(body: dict) -> dict:
        if body.get("tools"):
            return {**body, "tool_choice": {"type": "function", "function": {"name": tool}}}
        return body

    return rewrite


@pytest.fixture(scope="module")
def small_window(llama_pool: LlamaPool):
    """One function-calling server with a 2,048-token window for this module's tests."""
    server = llama_pool.start_private("smollm2-fc", "context-2k", n_ctx=WINDOW)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def proxy_for(small_window):
    started: list[RecordingProxy] = []

    def factory(tool: str) -> RecordingProxy:
        proxy = RecordingProxy(small_window.base_url, rewrite=forcing(tool)).start()
        started.append(proxy)
        return proxy

    try:
        yield factory
    finally:
        for proxy in started:
            proxy.stop()


def overflowed(exchange: ProxiedExchange) -> bool:
    return exchange.status == 400 and b"context_length_exceeded" in exchange.response


def summary_text(exchange: ProxiedExchange) -> str:
    """The text a summary request (no tools offered) was answered with."""
    done = exchange.completion() if exchange.status == 200 else None
    return (done or {}).get("content") or ""


async def test_a_runaway_call_in_memory_is_shortened_and_the_next_run_gets_through(proxy_for):
    """Item 1: the memory holds a rejected call with 10 KB of invalid JSON (as a model wrote
    it); the next run (a plan step of run_flow is one) is refused by the server, compaction
    shortens the arguments to a valid JSON stub and the retry is answered."""
    proxy = proxy_for("terminate")
    llm = LLM.create(llm_config=real_settings(proxy.base_url, max_tokens=32, timeout=PATIENT))
    agent = ToolCallAgent(
        llm=llm, available_tools=ToolCollection(RunCode(), Terminate()), max_steps=2
    )
    runaway = ToolCall.model_validate(
        {
            "id": "call_runaway",
            "function": {
                "name": "run_code",
                "arguments": '{"code": "' + "print('the same line again')\\n" * 350,
            },
        }
    )
    rejected = await agent.execute_tool(runaway)
    assert rejected.failed  # the arguments are not JSON
    agent.memory.add_message(Message.user_message("Print a line with Python."))
    agent.memory.add_message(Message.from_tool_calls([runaway], content=""))
    agent.memory.add_message(
        Message.tool_message(rejected.text, name="run_code", tool_call_id="call_runaway")
    )

    result = await agent.run("Now finish the task.")

    chats = proxy.chat_requests()  # a first streamed try may come back empty (see docs)
    refused = [i for i, e in enumerate(chats) if overflowed(e)]
    assert refused, [e.status for e in chats]
    assert result.stop_reason is StopReason.COMPLETED, result
    answered = [e for e in chats[refused[0] + 1 :] if e.completion()]
    assert answered, [e.status for e in chats]
    calls = [c for m in answered[0].messages for c in m.get("tool_calls") or ()]
    assert calls[0]["id"] == "call_runaway" and calls[0]["function"]["name"] == "run_code"
    stub = json.loads(calls[0]["function"]["arguments"])
    assert "arguments shortened to fit the context window" in stub["_shortened"]
    assert llm.context_window == WINDOW


@pytest.mark.timeout(900)  # 1 minute on a quiet 2-core machine, 10 beside other llama servers
async def test_an_eight_step_task_runs_to_its_budget_with_real_summaries(proxy_for, tmp_path: Path):
    """The issue's acceptance run: Manus (its system prompt, tool schemas and the task take
    about 1,700 of the server's 2,048 tokens, far above the 60 % target) records a reading at
    every step. The conversation outgrows the window by step 5 or 6; compaction summarizes
    old turns to what fits, with summaries the model writes, and the run uses its whole
    budget of 8 steps."""
    proxy = proxy_for("record_reading")
    # Native tool calls throughout: under "auto", calls cut off at max_tokens may turn the
    # endpoint constrained mid-run (issue 38), whose tool prompt alone nearly fills this
    # window; when that happens depends on the server's cache and the machine's load. The
    # switch has tests of its own (test_constrained.py); this one is about compaction.
    llm = LLM.create(
        llm_config=real_settings(
            proxy.base_url, max_tokens=48, timeout=PATIENT, tool_calling="native"
        )
    )
    agent = Manus(
        llm=llm,
        workspace=tmp_path,
        max_steps=8,
        duplicate_threshold=100,  # forced calls may repeat; that is not under test here
        compaction=CompactionSettings(summary_max_tokens=96),
    )
    agent.available_tools.add_tool(RecordReading())
    compactions: list[Compacted] = []
    agent.subscribe(lambda e: compactions.append(e) if isinstance(e, Compacted) else None)
    result = await agent.run(
        "Record the readings of the eight sensors of the boiler room (inlet and outlet "
        "pressure, inlet and outlet temperature, flue gas oxygen, water level, feed pump "
        "current, burner flame), one per step, each with a remark."
    )

    chats = proxy.chat_requests()
    trail = [(e.status, e.has_tools) for e in chats], compactions
    assert result.steps == 8, (result, trail)
    assert result.stop_reason is StopReason.MAX_STEPS, (result, trail)
    summaries = [summary_text(e) for e in chats if not e.has_tools]
    written = [s for s in summaries if s.strip()]
    assert written, f"no summary was written by the model: {trail}"
    later = [json.dumps(e.messages) for e in chats if e.has_tools and e.status == 200]
    quoted = json.dumps(written[0].strip()[:20])[1:-1]  # as it appears in a request body
    assert any(SUMMARY_INTRO.strip()[:40] in text and quoted in text for text in later)
    assert any(c.summarized for c in compactions)
    assert all(c.after_tokens < c.before_tokens for c in compactions)
