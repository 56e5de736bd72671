"""Live events and streaming: what a run reports, in which order, and how streamed answers
are put back together (over real HTTP against the scripted server)."""

from __future__ import annotations

import json

import pytest

from app.agent.toolcall import ToolCallAgent
from app.events import (
    Event,
    PlanChanged,
    RunFinished,
    StepStarted,
    TextDelta,
    Thought,
    ToolCallEvent,
    ToolResultEvent,
    UsageReport,
    event_from_json,
)
from app.flow import FlowFactory, FlowType
from app.schema import AgentState
from app.testing import call, error, raw, text, tool_calls


def kinds(events: list[Event], *, deltas: bool = False) -> list[str]:
    return [e.kind for e in events if deltas or not isinstance(e, TextDelta)]


async def test_event_sequence_of_a_scripted_run(llm_server, make_llm):
    llm_server.push(
        tool_calls(
            call("create_chat_completion", {"response": "forty-two"}, id="c1"),
            content="Let me answer that.",
            usage={"prompt_tokens": 50, "completion_tokens": 7},
        ),
        text("The answer is 42.", usage={"prompt_tokens": 80, "completion_tokens": 5}),
    )
    agent = ToolCallAgent(llm=make_llm(), answer_tool_names=[])
    events = [event async for event in agent.run_stream("what is six times seven?")]

    assert kinds(events) == [
        "run_started",
        "step_started",
        "usage",
        "thought",
        "tool_call",
        "tool_result",
        "step_finished",
        "step_started",
        "usage",
        "thought",
        "step_finished",
        "run_finished",
    ]
    assert events[0].prompt == "what is six times seven?" and events[0].max_steps == 30
    steps = [e.step for e in events if isinstance(e, StepStarted)]
    assert steps == [1, 2]
    call_event = next(e for e in events if isinstance(e, ToolCallEvent))
    assert (call_event.call_id, call_event.name) == ("c1", "create_chat_completion")
    assert json.loads(call_event.arguments) == {"response": "forty-two"}
    result_event = next(e for e in events if isinstance(e, ToolResultEvent))
    assert result_event.call_id == "c1" and "forty-two" in result_event.output
    assert not result_event.error
    usages = [e for e in events if isinstance(e, UsageReport)]
    assert [u.usage.prompt_tokens for u in usages] == [50, 80]
    assert usages[-1].run_usage.total_tokens == 142 and not usages[-1].run_usage.estimated
    finished = events[-1]
    assert isinstance(finished, RunFinished) and finished.state == "FINISHED"
    assert finished.final_answer == "The answer is 42." and finished.steps == 2
    assert finished.result.final_answer == "The answer is 42."  # what run() returns
    assert finished.usage.total_tokens == 142
    # Every event survives a trip through JSON (what session files hold).
    for event in events:
        again = event_from_json(json.loads(json.dumps(event.to_json())))
        assert again is not None and again.kind == event.kind


async def test_callbacks_see_the_same_events_and_run_is_unchanged(llm_server, make_llm):
    llm_server.push(tool_calls(call("create_chat_completion", {"response": "x"})), text("done"))
    agent = ToolCallAgent(llm=make_llm(), answer_tool_names=[])
    seen_sync: list[Event] = []
    seen_async: list[Event] = []

    async def on_event(event: Event) -> None:
        seen_async.append(event)

    def broken(event: Event) -> None:
        raise RuntimeError("a listener bug must not stop the run")

    agent.subscribe(seen_sync.append)
    agent.subscribe(broken)
    unsubscribe = agent.events.subscribe(on_event)
    result = await agent.run("go")
    assert result.final_answer == "done" and result.state == AgentState.FINISHED
    assert str(result).startswith("Step 1: ")
    assert kinds(seen_sync, deltas=True) == kinds(seen_async, deltas=True)
    assert seen_sync[-1].kind == "run_finished"
    unsubscribe()
    llm_server.push(text("again"))
    await agent.run("more")
    assert seen_async[-1].kind == "run_finished" and len(seen_sync) > len(seen_async)


async def test_streamed_text_arrives_in_several_deltas(llm_server, make_llm):
    answer = "Streaming means the words show up one after another as they are written."
    llm_server.push(text(answer))
    agent = ToolCallAgent(llm=make_llm())
    events = [event async for event in agent.run_stream("explain streaming")]
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(deltas) >= 5 and "".join(deltas) == answer
    thought = next(e for e in events if isinstance(e, Thought))
    assert thought.text == answer
    # Deltas come before the step's thought, and belong to step 1.
    assert kinds(events, deltas=True).index("text_delta") < kinds(events, deltas=True).index(
        "thought"
    )
    assert {e.step for e in events if isinstance(e, TextDelta)} == {1}
    assert llm_server.requests[0].stream is True
    assert llm_server.requests[0].body["stream_options"] == {"include_usage": True}


async def test_turns_stream_even_when_nobody_is_listening(llm_server, make_llm):
    """Streamed by default: an abandoned streamed answer stops the server's generation."""
    llm_server.push(text("plain"))
    result = await ToolCallAgent(llm=make_llm()).run("hi")
    assert result.final_answer == "plain"
    assert llm_server.requests[0].stream is True


async def test_tool_call_deltas_reassemble_into_the_same_calls(llm_server, make_llm):
    reply = tool_calls(
        call("python_execute", {"code": "print('a, b: {c}')\nx = [1, 2, 3]"}, id="call_a"),
        call("bash", {"command": "ls -la | grep 'é'"}, id="call_b"),
        call(
            "str_replace_editor", {"command": "view", "path": "/tmp"}, id="call_c", raw_object=True
        ),
        content="Three things at once.",
        usage={"prompt_tokens": 10, "completion_tokens": 20},
    )
    llm_server.push(reply, reply)
    llm = make_llm()
    messages = [{"role": "user", "content": "do three things"}]
    deltas: list[str] = []
    streamed = await llm.ask_tool(messages, tools=[], on_delta=deltas.append)
    whole = await llm.request(messages, tools=[], stream=False)
    whole = whole.message
    assert [r.stream for r in llm_server.requests] == [True, False]
    assert streamed.tool_calls == whole.tool_calls
    assert [c.id for c in streamed.tool_calls] == ["call_a", "call_b", "call_c"]
    assert json.loads(streamed.tool_calls[1].function.arguments) == {"command": "ls -la | grep 'é'"}
    assert streamed.content == whole.content == "Three things at once."
    assert "".join(deltas) == "Three things at once." and len(deltas) >= 2
    assert llm.usage.prompt_tokens == 20 and llm.usage.requests == 2


async def test_endpoint_that_refuses_streaming_is_asked_without(llm_server, make_llm):
    answers = iter(
        [
            tool_calls(call("create_chat_completion", {"response": "r"})),
            text("Answered without streaming."),
        ]
    )

    def respond(request):
        if request.stream:
            return error(400, "stream is not supported by this server")
        return next(answers)

    llm_server.responder = respond
    agent = ToolCallAgent(llm=make_llm(), answer_tool_names=[])
    events = [event async for event in agent.run_stream("hi")]
    assert events[-1].final_answer == "Answered without streaming."
    # One refused streamed request, then only plain ones: the refusal is remembered.
    assert [r.stream for r in llm_server.requests] == [True, False, False]
    assert "stream_tools" in agent.llm.refused_features
    # The watcher still gets the text, in one piece.
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Answered without streaming."]


async def test_endpoint_answering_a_stream_request_with_json(llm_server, make_llm):
    body = {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": "plain JSON answer"},
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7},
    }
    llm_server.push(raw(200, json.dumps(body)))
    agent = ToolCallAgent(llm=make_llm())
    events = [event async for event in agent.run_stream("hi")]
    assert events[-1].final_answer == "plain JSON answer"
    assert events[-1].usage.total_tokens == 7
    assert "stream_tools" in agent.llm.refused_features and len(llm_server.requests) == 1


async def test_stream_setting_off_keeps_requests_plain(llm_server, make_llm):
    llm_server.push(text("no stream wanted"))
    agent = ToolCallAgent(llm=make_llm(stream=False))
    events = [event async for event in agent.run_stream("hi")]
    assert events[-1].final_answer == "no stream wanted"
    assert llm_server.requests[0].stream is False


async def test_leaving_the_stream_early_stops_the_run(llm_server, make_llm):
    llm_server.push(
        *[tool_calls(call("create_chat_completion", {"response": str(i)})) for i in range(5)]
    )
    agent = ToolCallAgent(llm=make_llm(), answer_tool_names=[])
    async with agent.run_stream("loop") as stream:
        async for event in stream:
            if isinstance(event, StepStarted) and event.step == 2:
                break
    assert agent.state == AgentState.IDLE and not agent.events.active
    assert len(llm_server.requests) <= 2


async def test_running_twice_at_once_raises_from_the_stream(llm_server, make_llm):
    agent = ToolCallAgent(llm=make_llm())
    agent.state = AgentState.RUNNING
    with pytest.raises(Exception, match="already running"):
        async for _ in agent.run_stream("x"):
            pass


async def test_flow_stream_has_plan_changes_and_agent_events(llm_server, make_llm, tmp_path):
    from app.agent import Manus

    llm_server.push(
        tool_calls(
            call(
                "planning", {"command": "create", "plan_id": "p", "title": "T", "steps": ["say hi"]}
            )
        ),
        tool_calls(call("terminate", {"status": "success"}), content="hi said"),
        text("All done."),
    )
    agent = Manus(llm=make_llm(), workspace=tmp_path)
    flow = FlowFactory.create_flow(FlowType.PLANNING, {"manus": agent}, llm=make_llm())
    events = [event async for event in flow.run_stream("greet")]
    changes = [e.change for e in events if isinstance(e, PlanChanged)]
    assert changes == ["plan_created", "step_started", "step_finished", "summary"]
    agent_kinds = [e.kind for e in events if e.source == "Manus"]
    assert agent_kinds[0] == "run_started" and agent_kinds[-1] == "run_finished"
    # Agent events sit between the step's start and finish.
    order = [("plan:" + e.change) if isinstance(e, PlanChanged) else e.kind for e in events]
    assert (
        order.index("plan:step_started")
        < order.index("run_started")
        < order.index("run_finished")
        < order.index("plan:step_finished")
    )
    # After the flow, the agent's events are no longer forwarded.
    assert not agent.events.active


async def test_tool_result_error_flag_comes_from_the_result_not_its_text(llm_server, make_llm):
    from app.tool.base import BaseTool
    from app.tool.tool_collection import ToolCollection

    class Lookup(BaseTool):
        name: str = "lookup"
        description: str = "Look a key up."
        parameters: dict = {"type": "object", "properties": {"key": {"type": "string"}}}

        async def execute(self, key: str = "") -> object:
            if key == "missing":
                return self.fail_response("no such key")  # a failure without "Error" up front
            return self.success_response("Error codes: none today")  # a success that says Error

    llm_server.push(
        tool_calls(
            call("lookup", {"key": "missing"}, id="a"),
            call("lookup", {"key": "x"}, id="b"),
            call("nosuch", {}, id="c"),
        ),
        text("done"),
    )
    agent = ToolCallAgent(llm=make_llm(), available_tools=ToolCollection(Lookup()))
    events = [event async for event in agent.run_stream("look")]
    flags = {e.call_id: e.error for e in events if isinstance(e, ToolResultEvent)}
    assert flags == {"a": True, "b": False, "c": True}


@pytest.mark.e2e
async def test_a_failed_python_run_is_an_error_result_event(llm_server, make_llm, tmp_path):
    """python_execute keeps upstream's dict result; its ``success: false`` is the flag."""
    from app.tool.python_execute import PythonExecute
    from app.tool.tool_collection import ToolCollection

    llm_server.push(
        tool_calls(
            call("python_execute", {"code": "raise SystemExit(3)"}, id="bad"),
            call("python_execute", {"code": "print('Error is just a word')"}, id="ok"),
        ),
        text("done"),
    )
    tool = PythonExecute(workspace=tmp_path)
    agent = ToolCallAgent(llm=make_llm(), available_tools=ToolCollection(tool))
    events = [event async for event in agent.run_stream("run it")]
    flags = {e.call_id: e.error for e in events if isinstance(e, ToolResultEvent)}
    assert flags == {"bad": True, "ok": False}
