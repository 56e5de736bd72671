"""One failure channel: a tool fails by raising ``ToolError`` or returning a result marked as an
error (upstream's ``ToolFailure`` / ``ToolResult(error=)`` included); the tool message carries
``is_error`` into memory, sessions and compaction, and never onto the wire."""

from __future__ import annotations

import json
from typing import Any

from app.agent.compaction import shorten_long_parts
from app.agent.toolcall import ToolCallAgent
from app.exceptions import ToolError
from app.llm import LLM
from app.schema import Message
from app.session import SessionStore
from app.testing import FunctionTransport, TestModel
from app.tool import Terminate, ToolCollection, ToolFailure, ToolResult, tool


@tool
def raises() -> str:
    """Fails the modern way."""
    raise ToolError("no such city")


@tool
def marked() -> ToolResult:
    """Fails with a marked result whose text is the output."""
    return ToolResult(output="half done, then stopped", is_error=True)


@tool
def upstream_failure() -> ToolResult:
    """Fails the way upstream's tools do."""
    return ToolFailure(error="upstream says no")


@tool
def upstream_error_field() -> ToolResult:
    """Fails through ``ToolResult(error=...)``."""
    return ToolResult(error="error field")


@tool
def works() -> str:
    """Succeeds."""
    return "fine"


TOOLS = (raises, marked, upstream_failure, upstream_error_field, works)


async def run_all(tmp_path: Any) -> tuple[ToolCallAgent, Any]:
    store = SessionStore.for_workspace(tmp_path)
    agent = ToolCallAgent(
        name="probe", model=TestModel(), available_tools=ToolCollection(*TOOLS, Terminate())
    )
    recorder = store.start("agent", program="test")
    recorder.attach_agent(agent)
    await agent.run("Try every tool.")
    await recorder.close()
    return agent, store.load(recorder.session_id)


async def test_every_way_of_failing_marks_the_tool_message(tmp_path) -> None:
    agent, data = await run_all(tmp_path)
    flags = {m.name: m.is_error for m in agent.memory.messages if m.role == "tool"}
    assert flags == {
        "raises": True,
        "marked": True,
        "upstream_failure": True,
        "upstream_error_field": True,
        "works": False,
        "terminate": False,
    }
    texts = {m.name: m.content or "" for m in agent.memory.messages if m.role == "tool"}
    assert "no such city" in texts["raises"] and "half done" in texts["marked"]
    # Sessions keep the flag: a restored agent has the same messages, flags included.
    assert data.problems == []
    fresh = ToolCallAgent(name="probe", model=TestModel())
    data.restore_agent(fresh)
    assert fresh.memory.messages == agent.memory.messages


async def test_the_flag_never_reaches_the_model() -> None:
    seen: list[dict[str, Any]] = []

    def answer(messages: list[dict[str, Any]], info: Any) -> str:
        seen.extend(messages)
        return "ok"

    llm = LLM.create(llm_config={"model": "m", "api_key": "k"}, transport=FunctionTransport(answer))
    history = [
        Message.user_message("go"),
        Message.from_tool_calls(
            tool_calls=[{"id": "c1", "function": {"name": "raises", "arguments": "{}"}}]
        ),
        Message.tool_message("Error: no", name="raises", tool_call_id="c1", is_error=True),
    ]
    await llm.request(history)
    assert seen and all("is_error" not in m for m in seen)
    assert "is_error" not in json.dumps(seen)
    assert history[2].to_dict()["is_error"] is True
    assert "is_error" not in Message.user_message("x").to_dict()


def test_compaction_keeps_the_flag() -> None:
    long = "x" * 5000
    messages = [
        Message.tool_message(long, name="raises", tool_call_id="c1", is_error=True),
        Message.tool_message(long, name="works", tool_call_id="c2"),
    ]
    shortened, count = shorten_long_parts(messages, end=2, limit=100)
    assert count == 2
    assert [m.is_error for m in shortened] == [True, False]
    assert all(len(m.content or "") < 1000 for m in shortened)
