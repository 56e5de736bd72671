"""How a run ends when the model does not cooperate: empty, cut, repeated or overflowing
replies, answer tools, reasoning and hostile arguments. Real HTTP against the scripted server."""

from __future__ import annotations

import io
import json
from typing import Any

from app.agent.result import RunResult, StopReason
from app.agent.toolcall import ToolCallAgent
from app.cli.render import EventRenderer
from app.config import CompactionSettings
from app.events import Compacted, ErrorEvent, Reasoning, RunFinished, Thought
from app.llm.model import ModelResponse
from app.llm.usage import Usage
from app.prompt.toolcall import CONTINUE_PROMPT, EMPTY_REPLY_PROMPT, STUCK_PROMPT
from app.schema import AgentState, Message
from app.testing import FunctionModel, call, error, raw, text, tool_calls
from app.tool.base import BaseTool
from app.tool.terminate import Terminate
from app.tool.tool_collection import ToolCollection
from tests.tool_fixtures import Echo


class Dump(BaseTool):
    """A long output, as listings and logs are."""

    name: str = "dump"
    description: str = "Print a long report."
    parameters: dict[str, Any] | None = {
        "type": "object",
        "properties": {"part": {"type": "integer"}},
        "required": ["part"],
    }

    async def execute(self, part: int) -> str:
        return f"report part {part}: " + " ".join(f"line{part}-{i}" for i in range(200))


def make_agent(llm: Any, *tools: BaseTool, **kw: Any) -> ToolCallAgent:
    collection = ToolCollection(*(tools or (Echo(calls=[]),)), Terminate())
    if llm is not None:
        kw["llm"] = llm
    return ToolCallAgent(available_tools=collection, **kw)


def last_user(request) -> str:
    return request.body["messages"][-1]["content"]


def is_summary(request) -> bool:
    return request.tools is None  # the summary request offers no tools


def overflow() -> Any:
    return error(
        400,
        "This model's maximum context length is 2048 tokens. However, you requested 5000 tokens.",
        code="context_length_exceeded",
    )


# ---- 1. compaction that cannot help is not repeated ----------------------------------------


async def test_a_target_the_fixed_part_and_newest_turn_fill_spends_no_summary_calls(
    llm_server, make_llm
):
    """The system prompt, tool schemas, task and newest turn alone pass the target: compaction
    must not call the model for a summary at every step (the bug: 50 of 70 requests were
    summaries)."""
    replies = iter([tool_calls(call("dump", {"part": i})) for i in range(10)])

    def respond(request):
        return text("- a summary") if is_summary(request) else next(replies)

    llm_server.responder = respond
    long_prompt = "You are a careful agent. " + "Follow the rules of the house. " * 60
    settings = CompactionSettings(trigger=0.5, target=0.3, keep_recent_turns=2, stub_chars=300)
    llm = make_llm(max_input_tokens=2400)
    agent = make_agent(llm, Dump(), max_steps=10, system_prompt=long_prompt, compaction=settings)
    events = [e async for e in agent.run_stream("Read the parts of the report.")]
    result = events[-1].result

    summaries = [r for r in llm_server.requests if is_summary(r)]
    # The target cannot be reached: no call is spent on it; one summary at most, when a
    # request would not fit the window otherwise (issue 29: compact to what fits).
    assert len(summaries) <= 1
    assert len(llm_server.requests) == 10 + len(summaries)  # one request per step, that's all
    assert result.steps == 10 and result.stop_reason is StopReason.MAX_STEPS
    compactions = [e for e in events if isinstance(e, Compacted)]
    assert compactions and sum(c.summarized > 0 for c in compactions) == len(summaries)
    # It rests after falling short: not every step compacts.
    assert len(compactions) < 10
    assert sum(c.stubbed for c in compactions) > 0  # long outputs were still shortened
    for request in llm_server.requests:  # and every request fit the window
        count = await llm.count_request_tokens(
            [Message(**m) for m in request.messages], None, request.tools
        )
        assert count <= 2400


async def test_a_reachable_target_takes_one_summary_per_compaction(llm_server, make_llm):
    replies = iter([tool_calls(call("dump", {"part": i})) for i in range(12)] + [text("done")])

    def respond(request):
        return text("- read some parts") if is_summary(request) else next(replies)

    llm_server.responder = respond
    agent = make_agent(
        make_llm(max_input_tokens=3000),
        Dump(),
        max_steps=20,
        compaction=CompactionSettings(keep_recent_turns=2, stub_chars=300),
    )
    events = [e async for e in agent.run_stream("Read the parts.")]
    compactions = [e for e in events if isinstance(e, Compacted) and e.summarized]
    summaries = [r for r in llm_server.requests if is_summary(r)]
    assert events[-1].result.ok
    assert summaries and len(summaries) == len(compactions)  # one LLM call per compaction
    assert all(c.after_tokens <= 0.6 * 3000 for c in compactions)


# ---- 2. a context-length 400 compacts and retries once --------------------------------------


async def test_an_overflow_from_the_server_compacts_and_retries_the_step(llm_server, make_llm):
    replies = iter([tool_calls(call("dump", {"part": 1})), overflow(), text("all read")])

    def respond(request):
        return text("- read part 1") if is_summary(request) else next(replies)

    llm_server.responder = respond
    agent = make_agent(make_llm(max_retries=0), Dump())  # gpt-4o-mini: a 128k window
    events = [e async for e in agent.run_stream("Read part 1.")]
    result = events[-1].result
    assert result.ok and result.final_answer == "all read"
    assert result.stop_reason is StopReason.COMPLETED and result.steps == 2
    assert [e for e in events if isinstance(e, Compacted)]
    agent_requests = [r for r in llm_server.requests if not is_summary(r)]
    refused, retried = agent_requests[1], agent_requests[2]
    assert len(json.dumps(retried.messages)) < len(json.dumps(refused.messages))
    assert "line1-199" in json.dumps(refused.messages)
    assert "line1-199" not in json.dumps(retried.messages)  # the long output was shortened


async def test_a_second_overflow_in_the_step_fails_the_run(llm_server, make_llm):
    replies = iter([tool_calls(call("dump", {"part": 1})), overflow(), overflow()])

    def respond(request):
        return text("- read part 1") if is_summary(request) else next(replies)

    llm_server.responder = respond
    agent = make_agent(make_llm(max_retries=0), Dump(), max_steps=5)
    events = [e async for e in agent.run_stream("Read part 1.")]
    result = events[-1].result
    assert result.state == AgentState.ERROR and result.steps == 2
    assert result.stop_reason is StopReason.CONTEXT_OVERFLOW and not result.ok
    assert "even after compacting" in result.failure
    assert len([r for r in llm_server.requests if not is_summary(r)]) == 3
    assert events[-1].stop_reason == "context_overflow"


async def test_an_overflow_with_nothing_to_compact_fails_without_a_pointless_retry(
    llm_server, make_llm
):
    llm_server.push(overflow(), text("never sent"))
    agent = make_agent(make_llm(max_retries=0))
    result = await agent.run("hi")
    assert result.stop_reason is StopReason.CONTEXT_OVERFLOW
    assert "could not make it smaller" in result.failure
    assert len(llm_server.requests) == 1


# ---- 3. empty replies -----------------------------------------------------------------------


async def test_empty_replies_are_pointed_out_then_fail_the_run(llm_server, make_llm):
    llm_server.push(text(""), text("   "), text(""), text("never asked"))
    agent = make_agent(make_llm(), max_steps=10)
    events = [e async for e in agent.run_stream("q")]
    result = events[-1].result
    assert result.state == AgentState.ERROR and result.steps == 3
    assert result.stop_reason is StopReason.EMPTY_REPLIES
    assert result.failure == "the model returned 3 empty replies in a row"
    assert len(llm_server.requests) == 3
    assert EMPTY_REPLY_PROMPT not in last_user(llm_server.requests[0])
    assert all(last_user(r).startswith(EMPTY_REPLY_PROMPT) for r in llm_server.requests[1:])
    assert all(EMPTY_REPLY_PROMPT not in (m.content or "") for m in agent.memory.messages)
    assert any(isinstance(e, ErrorEvent) and e.error_type == "empty_replies" for e in events)


async def test_an_empty_reply_then_an_answer_completes(llm_server, make_llm):
    llm_server.push(text(""), text("the answer"))
    result = await make_agent(make_llm()).run("q")
    assert result.ok and result.final_answer == "the answer" and result.steps == 2
    assert result.step_results[0] == "Step 1: Error: the model returned an empty reply"


# ---- 4. answers cut at max_tokens -----------------------------------------------------------


async def test_a_cut_answer_is_continued_and_joined(llm_server, make_llm):
    llm_server.push(text("The first half", finish_reason="length"), text(" and the end."))
    agent = make_agent(make_llm())
    result = await agent.run("write")
    assert result.ok and result.final_answer == "The first half and the end."
    second = llm_server.requests[1].body["messages"]
    assert {"role": "assistant", "content": "The first half"} in second
    assert second[-1]["content"].startswith(CONTINUE_PROMPT)


async def test_an_answer_cut_every_time_fails_the_run(llm_server, make_llm):
    llm_server.push(*[text(f"part {i}", finish_reason="length") for i in range(5)])
    result = await make_agent(make_llm(max_tokens=16), max_steps=10).run("write")
    assert result.state == AgentState.ERROR and not result.ok
    assert result.stop_reason is StopReason.TRUNCATED
    assert "the answer was cut at max_tokens" in result.failure
    assert len(llm_server.requests) == 3  # two continuations, then it stops


async def test_a_cut_tool_call_with_broken_arguments_is_not_run(llm_server, make_llm):
    echo = Echo(calls=[])
    llm_server.push(
        tool_calls(call("echo", '{"text": "a very long te'), finish_reason="length"),
        tool_calls(call("echo", {"text": "short"})),
        text("done"),
    )
    result = await make_agent(make_llm(), echo).run("echo")
    assert echo.calls == ["short"] and result.ok
    tool_msg = next(m for m in llm_server.requests[1].body["messages"] if m["role"] == "tool")
    assert "cut off at the length limit" in tool_msg["content"]
    assert "was not run" in tool_msg["content"]


# ---- 5. create_chat_completion gives the answer ---------------------------------------------


async def test_the_default_agent_finishes_with_create_chat_completion(llm_server, make_llm):
    llm_server.push(
        tool_calls(call("create_chat_completion", {"response": "forty-two"})), text("never asked")
    )
    agent = ToolCallAgent(llm=make_llm())
    result = await agent.run("six times seven?")
    assert agent.state == AgentState.FINISHED and result.ok
    assert result.final_answer == "forty-two" and result.steps == 1
    assert len(llm_server.requests) == 1


async def test_a_failed_create_chat_completion_does_not_finish(llm_server, make_llm):
    llm_server.push(
        tool_calls(call("create_chat_completion", {"answer": "x"})),
        tool_calls(call("create_chat_completion", {"response": "y"})),
    )
    result = await ToolCallAgent(llm=make_llm()).run("q")
    assert result.ok and result.final_answer == "y" and result.steps == 2


# ---- 7. a model that keeps repeating itself -------------------------------------------------


async def test_repeating_after_the_hints_ends_the_run_as_stuck(llm_server, make_llm):
    same = tool_calls(call("echo", {"text": "same"}))
    llm_server.push(*[same] * 8)
    agent = make_agent(make_llm(), max_steps=10)  # duplicate_threshold 2, max_stuck_hints 2
    result = await agent.run("q")
    assert result.state == AgentState.ERROR and result.stop_reason is StopReason.STUCK
    assert result.failure == "the model repeated the same action 5 times"
    assert result.steps == 5 and len(llm_server.requests) == 5
    hinted = [STUCK_PROMPT in last_user(r) for r in llm_server.requests]
    assert hinted == [False, False, False, True, True]


async def test_a_changed_action_resets_the_hints(llm_server, make_llm):
    same = tool_calls(call("echo", {"text": "same"}))
    other = tool_calls(call("echo", {"text": "other"}))
    llm_server.push(same, same, same, same, other, same, same, same, text("done"))
    result = await make_agent(make_llm(), max_steps=12).run("q")
    assert result.ok and result.final_answer == "done"


# ---- 8. reasoning is thinking, not the answer -----------------------------------------------


def replying(reply: ModelResponse) -> ToolCallAgent:
    """An agent whose model answers ``reply`` (the LLM stack in between, no HTTP)."""
    return make_agent(None, model=FunctionModel(lambda messages, info: reply))


async def test_reasoning_is_an_event_never_the_answer_or_memory():
    reply = ModelResponse(
        message=Message.assistant_message("Paris."),
        usage=Usage(),
        finish_reason="stop",
        reasoning="The capital of France is Paris.",
    )
    agent = replying(reply)
    seen: list[Any] = []
    agent.subscribe(seen.append)
    assert await agent.think()
    assert await agent.act() == "Paris."
    assert agent.final_answer() == "Paris." and agent.state == AgentState.FINISHED
    assert [e.text for e in seen if isinstance(e, Reasoning)] == ["The capital of France is Paris."]
    assert [e.text for e in seen if isinstance(e, Thought)] == ["Paris."]
    assert all("capital" not in (m.content or "") for m in agent.memory.messages)
    out = io.StringIO()
    renderer = EventRenderer(stream=out)
    for event in seen:
        renderer(event)
    assert "is thinking: The capital of France is Paris." in out.getvalue()


async def test_reasoning_without_an_answer_is_an_empty_reply():
    agent = replying(ModelResponse(message=Message.assistant_message(""), reasoning="hmm..."))
    assert not await agent.think()
    assert agent.final_answer() is None and not agent.memory.messages


# ---- 9. hostile replies ---------------------------------------------------------------------


async def test_a_malformed_reply_ends_the_run_with_a_reason(llm_server, make_llm):
    llm_server.push(raw(200, b"<html>not a completion</html>"))
    result = await make_agent(make_llm(max_retries=0)).run("q")
    assert result.state == AgentState.ERROR and result.stop_reason is StopReason.ERROR
    assert result.failure and not result.ok


async def test_arguments_nested_100000_deep_are_an_error_for_the_model(llm_server, make_llm):
    echo = Echo(calls=[])
    deep = '{"text": ' + '{"a": ' * 100_000 + "1" + "}" * 100_001
    llm_server.push(tool_calls(call("echo", deep)), text("sorry"))
    result = await make_agent(make_llm(), echo).run("q")
    assert result.ok and echo.calls == []
    tool_msg = next(m for m in llm_server.requests[1].body["messages"] if m["role"] == "tool")
    assert tool_msg["content"].startswith("Error:")
    assert "arguments too deeply nested" in tool_msg["content"]


async def test_a_tool_raising_anything_is_a_tool_result(llm_server, make_llm):
    class Recurse(BaseTool):
        name: str = "recurse"
        description: str = "Recurses forever."
        parameters: dict[str, Any] | None = {"type": "object", "properties": {}}

        async def execute(self) -> str:
            def down(n: int) -> int:
                return down(n + 1)

            return str(down(0))

    llm_server.push(tool_calls(call("recurse", {})), text("ok"))
    result = await make_agent(make_llm(), Recurse()).run("q")
    assert result.ok
    tool_msg = next(m for m in llm_server.requests[1].body["messages"] if m["role"] == "tool")
    assert "RecursionError" in tool_msg["content"]


# ---- typed results --------------------------------------------------------------------------


async def test_run_finished_and_the_result_carry_the_stop_reason(llm_server, make_llm):
    llm_server.push(*[tool_calls(call("echo", {"text": str(i)})) for i in range(2)])
    agent = make_agent(make_llm(), max_steps=2)
    events = [e async for e in agent.run_stream("q")]
    finished = events[-1]
    assert isinstance(finished, RunFinished)
    assert finished.stop_reason == "max_steps" and "max_steps=2" in finished.failure
    assert finished.result.stop_reason is StopReason.MAX_STEPS and not finished.result.ok
    assert str(finished.result).endswith("Terminated: Reached max steps (2)")  # upstream log


def test_a_result_built_without_a_reason_infers_it():
    kw: dict[str, Any] = {"final_answer": None, "steps": 1, "step_results": [], "usage": Usage()}
    assert RunResult("x", state=AgentState.FINISHED, **kw).stop_reason is StopReason.COMPLETED
    idle = RunResult("x", state=AgentState.IDLE, **kw)
    assert idle.stop_reason is StopReason.MAX_STEPS and idle.failure
    err = RunResult("x", state=AgentState.ERROR, error=ValueError("boom"), **kw)
    assert err.stop_reason is StopReason.ERROR and err.failure == "boom"


async def test_with_compaction_off_an_overflow_fails_at_once(llm_server, make_llm):
    llm_server.push(tool_calls(call("dump", {"part": 1})), overflow(), text("never sent"))
    agent = make_agent(
        make_llm(max_retries=0), Dump(), compaction=CompactionSettings(enabled=False)
    )
    result = await agent.run("Read part 1.")
    assert result.stop_reason is StopReason.CONTEXT_OVERFLOW and result.steps == 2
    assert "maximum context length is 2048" in result.failure
    assert len(llm_server.requests) == 2
