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


# ---- issue 29: what is big gets shortened, and compaction aims at what fits ----------------

SMALL_WINDOW = 1500
RUNAWAY = '{"code": "' + "print('a very long line of code')\\n" * 300  # 10 KB, never closed


class Run(BaseTool):
    """A tool taking code, as python_execute does."""

    name: str = "run_code"
    description: str = "Run Python code."
    parameters: dict | None = {
        "type": "object",
        "properties": {"code": {"type": "string"}},
        "required": ["code"],
    }

    async def execute(self, code: str) -> str:
        return "ran"


class Measure(BaseTool):
    """A tool with a middling output."""

    name: str = "measure"
    description: str = "Measure one sensor."
    parameters: dict | None = {
        "type": "object",
        "properties": {"sensor": {"type": "integer"}},
        "required": ["sensor"],
    }

    async def execute(self, sensor: int) -> str:
        return f"sensor {sensor}: " + " ".join(f"reading{sensor}-{i}" for i in range(60))


def windowed(llm, replies, window: int = SMALL_WINDOW):
    """A responder that refuses, as llama.cpp does, every request above ``window`` tokens
    (counted as the framework counts, so only the compaction is under test)."""
    summaries = []

    def respond(request):
        tokens = request_tokens(llm, request)
        if tokens > window:
            return error(
                400,
                f"This model's maximum context length is {window} tokens. However, you "
                f"requested {tokens} tokens ({tokens} in the messages, None in the completion).",
                code="context_length_exceeded",
            )
        if request.tools is None:
            summaries.append(request)
            return text("- ran the code once; the call was rejected", usage=False)
        return next(replies)

    return respond, summaries


def log_lines(level: str = "INFO"):
    from app.logger import logger

    seen: list[str] = []
    return seen, logger.add(lambda m: seen.append(m.record["message"]), level=level)


def runaway_call():
    """The model's 10 KB call with invalid JSON, rejected by the agent but kept in memory."""
    return tool_calls(
        call("run_code", RUNAWAY, id="call_runaway"), content="Running it.", usage=False
    )


async def test_huge_tool_call_arguments_are_shortened_and_the_run_goes_on(llm_server, make_llm):
    """Issue 29 item 1: every request after the runaway call overflowed, because compaction
    only shortened tool outputs. Now the arguments become a valid JSON stub (same call id and
    name, saying what was cut) and the retry fits."""
    from app.logger import logger

    llm = make_llm(model="local-model")
    replies = iter([runaway_call(), text("done", usage=False)])
    respond, _ = windowed(llm, replies)
    llm_server.responder = respond
    agent = ToolCallAgent(llm=llm, max_steps=4, compaction=CompactionSettings(stub_chars=300))
    agent.available_tools.add_tool(Run())
    seen, handler = log_lines()
    try:
        events = [e async for e in agent.run_stream("Print a line.")]
    finally:
        logger.remove(handler)
    result = events[-1].result
    assert result.final_answer == "done" and result.error is None, result
    assert len(llm_server.requests) == 3  # the call, the refused request, its compacted retry
    sent = llm_server.requests[-1].messages
    calls = [c for m in sent for c in m.get("tool_calls") or ()]
    assert [c["id"] for c in calls] == ["call_runaway"]
    assert calls[0]["function"]["name"] == "run_code"
    stub = json.loads(calls[0]["function"]["arguments"])  # valid JSON
    assert "arguments shortened to fit the context window" in stub["_shortened"]
    assert f"of {len(RUNAWAY)} characters cut" in stub["_shortened"]
    assert_pairs_intact(sent)
    assert request_tokens(llm, llm_server.requests[-1]) <= SMALL_WINDOW
    (compacted,) = [e for e in events if isinstance(e, Compacted)]
    assert compacted.stubbed >= 1 and compacted.after_tokens < compacted.before_tokens
    assert any("compacting" in line for line in seen)
    assert any("Retrying the request" in line for line in seen)


async def test_a_next_run_does_not_inherit_an_unsendable_memory(llm_server, make_llm):
    """A run_flow plan step is a new run of the same agent on the same memory: the step after
    the one whose model wrote the runaway call must get its requests through."""
    llm = make_llm(model="local-model")
    replies = iter([runaway_call(), text("step two done", usage=False)])
    respond, _ = windowed(llm, replies)
    llm_server.responder = respond
    agent = ToolCallAgent(llm=llm, max_steps=1, compaction=CompactionSettings(stub_chars=300))
    agent.available_tools.add_tool(Run())
    first = await agent.run("Step 1: print a line.")
    assert first.steps == 1 and first.error is None  # its budget ended with the call in memory
    second = await agent.run("Step 2: say that you are done.")
    assert second.final_answer == "step two done" and second.error is None, second
    assert request_tokens(llm, llm_server.requests[-1]) <= SMALL_WINDOW


async def test_after_an_overflow_old_turns_are_summarized_when_only_the_window_fits(
    llm_server, make_llm
):
    """Issue 29 item 4: the system prompt and tools fill more than the target (60 %), so no
    summary can reach it; after an overflow the old turns are still summarized, to what fits
    the window, and the run goes on."""
    long_prompt = "You are a careful agent. " + "Follow the rules of the house. " * 140
    llm = make_llm(model="local-model")
    replies = iter(
        [tool_calls(call("measure", {"sensor": i}), usage=False) for i in range(6)]
        + [text("done", usage=False)]
    )
    respond, summaries = windowed(llm, replies, window=2400)
    llm_server.responder = respond
    agent = ToolCallAgent(
        llm=llm,
        max_steps=10,
        system_prompt=long_prompt,
        compaction=CompactionSettings(keep_recent_turns=1, stub_chars=300),
    )
    agent.available_tools.add_tool(Measure())
    fixed = await agent.compactor._count(agent, [])
    assert fixed > 0.6 * 2400  # the target is out of reach
    events = [e async for e in agent.run_stream("Read the parts.")]
    result = events[-1].result
    assert result.final_answer == "done" and result.error is None, result
    assert summaries, "no summary was asked for"
    compactions = [e for e in events if isinstance(e, Compacted)]
    assert any(c.summarized for c in compactions)
    assert all(c.after_tokens < c.before_tokens for c in compactions)
    last = llm_server.requests[-1].messages
    assert any("Summary of the work so far" in (m.get("content") or "") for m in last)


async def test_when_nothing_can_be_cut_no_retry_is_sent_and_the_log_says_why(llm_server, make_llm):
    """Issue 29 item 4: a system prompt alone above the window. No "Context compacted: X -> X",
    no "retrying" line, no second request: the run ends saying what is too big."""
    from app.logger import logger

    llm = make_llm(model="local-model")
    respond, summaries = windowed(llm, iter([]), window=300)
    llm_server.responder = respond
    agent = ToolCallAgent(
        llm=llm, max_steps=3, system_prompt="Follow the rules of the house. " * 80
    )
    seen, handler = log_lines()
    try:
        events = [e async for e in agent.run_stream("Hi.")]
    finally:
        logger.remove(handler)
    result = events[-1].result
    assert result.stop_reason is not None and result.stop_reason.value == "context_overflow"
    assert len(llm_server.requests) == 1 and not summaries
    assert not [e for e in events if isinstance(e, Compacted)]
    assert not any("Retrying" in line or "retrying" in line for line in seen), seen
    (why,) = [line for line in seen if "could not cut anything" in line]
    assert "system prompt, tool schemas and step prompt are" in why


async def test_a_plan_step_after_a_runaway_call_gets_its_requests_through(
    llm_server, make_llm, tmp_path
):
    """run_flow: step 0's model writes the runaway call and the step runs out of steps; the
    same agent, with the same memory, runs step 1. Its first request is refused, compaction
    shortens the call, and the step completes (the bug: every later step failed at once)."""
    from app.agent import Manus
    from app.flow import FlowFactory, FlowType

    plan = tool_calls(
        call(
            "planning",
            {"command": "create", "plan_id": "p", "title": "Script", "steps": ["Run", "Report"]},
        )
    )
    runaway = tool_calls(call("python_execute", RUNAWAY, id="call_runaway"), usage=False)
    replies = iter([plan, runaway, text("The plan can stay as it is."), text("Reported.")])
    step_llm = make_llm()
    respond, _ = windowed(step_llm, replies, window=4000)
    llm_server.responder = respond
    manus = Manus(llm=step_llm, workspace=tmp_path, max_steps=1)
    flow = FlowFactory.create_flow(FlowType.PLANNING, {"manus": manus}, llm=make_llm())
    result = await flow.execute("Write and run a script")

    assert result.plan["step_statuses"] == ["blocked", "completed"], result.plan
    assert result.plan["step_notes"][1] == "Reported."
    refused = [r for r in llm_server.requests if request_tokens(step_llm, r) > 4000]
    assert len(refused) == 1  # the first request of step 1, and only that one
    sent = llm_server.requests[llm_server.requests.index(refused[0]) + 1].messages
    calls = [c for m in sent for c in m.get("tool_calls") or ()]
    assert "_shortened" in json.loads(calls[0]["function"]["arguments"])
