"""Context compaction keeps a run far longer than its window going, within the window."""

from __future__ import annotations

import json

from app.agent.compaction import Compactor
from app.agent.toolcall import ToolCallAgent
from app.config import CompactionSettings
from app.events import Compacted
from app.llm.openai.wire import count_tokens
from app.llm.windows import known_window
from app.schema import AgentState
from app.testing import call, error, text, tool_calls
from app.tool.base import BaseTool

WINDOW = 2500


class Dump(BaseTool):
    """A tool with a big output, as file listings and logs are."""

    name: str = "dump"
    description: str = "Print a long report."
    parameters: dict | None = {
        "type": "object",
        "properties": {"part": {"type": "integer"}},
        "required": ["part"],
    }

    async def execute(self, part: int) -> str:
        return f"report part {part}: " + " ".join(f"line{part}-{i}" for i in range(150))


def request_tokens(llm, request) -> int:
    counter = llm.token_counter
    messages = request.messages
    return count_tokens(counter, messages, [None] * len(messages)) + counter.count_tools(
        request.tools
    )


def assert_pairs_intact(messages: list[dict]) -> None:
    """Every tool result follows its call, and every call has its result."""
    pending: set[str] = set()
    for message in messages:
        if message["role"] == "tool":
            assert message["tool_call_id"] in pending, "orphaned tool message"
            pending.discard(message["tool_call_id"])
            continue
        assert not pending, "a call without its result"
        for tool_call in message.get("tool_calls") or []:
            pending.add(tool_call["id"])
    assert not pending


async def test_a_long_run_stays_within_the_window_without_orphans(llm_server, make_llm):
    steps = 40
    agent_replies = iter(
        [tool_calls(call("dump", {"part": i}), content=f"Reading part {i}.") for i in range(steps)]
        + [tool_calls(call("terminate", {"status": "success"}), content="Read everything.")]
    )
    summaries = []

    def respond(request):
        if request.tools is None:  # the summary request: no tools offered
            summaries.append(request)
            return text(f"- read parts up to {len(summaries)}; nothing failed")
        return next(agent_replies)

    llm_server.responder = respond
    llm = make_llm(max_input_tokens=WINDOW)
    agent = ToolCallAgent(
        llm=llm,
        max_steps=steps + 5,
        compaction=CompactionSettings(keep_recent_turns=2, stub_chars=300),
    )
    agent.available_tools.add_tool(Dump())
    events = [event async for event in agent.run_stream("Read all parts of the report.")]

    result = events[-1].result
    assert result.state == AgentState.FINISHED and result.steps == steps + 1
    compactions = [e for e in events if isinstance(e, Compacted)]
    assert len(compactions) >= 2
    assert all(c.after_tokens < c.before_tokens and c.window == WINDOW for c in compactions)
    assert sum(c.summarized for c in compactions) > 0 and sum(c.stubbed for c in compactions) > 0
    assert summaries
    # The whole run is far beyond the window...
    total = sum(len(json.dumps(r.messages)) for r in llm_server.requests)
    assert total > 20 * WINDOW
    for request in llm_server.requests:
        # ...yet every request (the summary requests too) fits it.
        assert request_tokens(llm, request) <= WINDOW
        assert_pairs_intact(request.messages)
    for request in llm_server.requests:
        if request.tools is not None:
            users = [m["content"] for m in request.messages if m["role"] == "user"]
            assert users[0] == "Read all parts of the report."  # the task is always kept
    last = llm_server.requests[-1].messages
    assert any("Summary of the work so far" in (m.get("content") or "") for m in last)
    assert f"report part {steps - 1}:" in last[-2]["content"]  # the newest turn word for word


async def test_a_failing_summary_falls_back_to_dropping_old_turns(llm_server, make_llm):
    replies = iter([tool_calls(call("dump", {"part": i})) for i in range(12)] + [text("done")])

    def respond(request):
        if request.tools is None:
            return error(400, "summaries are not allowed here")
        return next(replies)

    llm_server.responder = respond
    agent = ToolCallAgent(
        llm=make_llm(max_input_tokens=WINDOW, max_retries=0),
        max_steps=20,
        compaction=CompactionSettings(keep_recent_turns=2, stub_chars=300),
    )
    agent.available_tools.add_tool(Dump())
    result = await agent.run("Read the parts.")
    assert result.final_answer == "done" and result.error is None
    last = llm_server.requests[-1].messages
    assert any("earlier messages were removed" in (m.get("content") or "") for m in last)
    assert_pairs_intact(last)


async def test_far_from_the_window_nothing_is_counted_or_changed(llm_server, make_llm):
    llm_server.push(tool_calls(call("dump", {"part": 1})), text("ok"))
    agent = ToolCallAgent(llm=make_llm(model="gpt-4o"))  # known window: 128k
    agent.available_tools.add_tool(Dump())
    compactor = Compactor()
    agent._compactor = compactor
    await agent.run("one part")
    assert compactor.window(agent) == 128_000
    sent = llm_server.requests[-1].messages
    assert "line1-149" in sent[-2]["content"]


def test_known_windows_and_settings():
    assert known_window("gpt-4o-mini") == 128_000
    assert known_window("openai/gpt-4.1-mini") == 1_000_000
    assert known_window("claude-3-5-sonnet") == 200_000
    assert known_window("my-local-model") is None
    import pytest
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="target"):
        CompactionSettings(trigger=0.5, target=0.8)
