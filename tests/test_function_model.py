"""FunctionModel (a Model on our typed messages) and FunctionTransport (the wire-level double
of an OpenAI-compatible endpoint): in process, no socket opened."""

from __future__ import annotations

import json
import socket

import pytest

from app.agent.toolcall import ToolCallAgent
from app.config import LLMSettings
from app.exceptions import LLMServerError, LLMTransientError
from app.llm import LLM, ModelParams
from app.llm.model import ModelResponse
from app.schema import AgentState, Message, ToolCall
from app.testing import FunctionInfo, FunctionModel, FunctionTransport, TransportInfo
from app.tool import Terminate, ToolCollection, tool

SETTINGS = LLMSettings(
    model="function-model", max_retries=2, retry_min_wait=0.001, retry_max_wait=0.002
)


@pytest.fixture
def no_sockets(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("an in-process model must not open sockets")

    monkeypatch.setattr(socket.socket, "connect", refuse)


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


# ---- FunctionModel: a Model -----------------------------------------------------------------


async def test_an_agent_runs_on_a_function_model(no_sockets):
    seen: list[FunctionInfo] = []

    def turn(messages: list[Message], info: FunctionInfo) -> object:
        seen.append(info)
        assert all(isinstance(m, Message) for m in messages)
        if not any(m.role == "tool" for m in messages):
            return ToolCall.function_call("add", {"a": 2, "b": 3})
        assert any(m.role == "tool" and "5" in (m.content or "") for m in messages)
        return [ToolCall.function_call("terminate", {"status": "success"})]

    model = FunctionModel(turn)
    agent = ToolCallAgent(model=model, available_tools=ToolCollection(add, Terminate()))
    result = await agent.run("What is 2 + 3?")
    assert agent.state == AgentState.FINISHED and result.steps == 2
    assert [info.index for info in seen] == [0, 1]
    assert seen[0].tool_names == ["add", "terminate"]
    assert result.usage.requests == 2 and result.usage.estimated  # four characters a token
    assert len(model.requests) == 2


async def test_params_the_caller_did_not_set_arrive_as_none(no_sockets):
    params: list[ModelParams] = []

    def answer(messages: list[Message], info: FunctionInfo) -> str:
        params.append(info.params)
        return "ok"

    await LLM.from_model(FunctionModel(answer)).ask([Message.user_message("hi")])
    await LLM.from_model(FunctionModel(answer), max_tokens=77).ask(
        [Message.user_message("hi")], temperature=0.5
    )
    assert (params[0].max_tokens, params[0].temperature) == (None, None)
    assert (params[1].max_tokens, params[1].temperature) == (77, 0.5)
    agent = ToolCallAgent(model=FunctionModel(answer))
    await agent.run("hi")
    assert (params[2].max_tokens, params[2].temperature) == (None, None)


async def test_text_streams_word_by_word_and_failures_are_retried(no_sockets):
    calls = {"n": 0}

    async def answer(messages: list[Message], info: FunctionInfo) -> str:
        calls["n"] += 1
        if calls["n"] == 1:
            raise LLMServerError("simulated 503", status_code=503)
        return "hello from a function"

    llm = LLM.from_model(FunctionModel(answer), retry_min_wait=0, retry_max_wait=0)
    deltas: list[str] = []
    response = await llm.request([Message.user_message("hi")], on_delta=deltas.append)
    assert response.message.content == "hello from a function" and calls["n"] == 2
    assert "".join(deltas) == "hello from a function" and len(deltas) == 4
    assert response.finish_reason == "stop"


async def test_a_function_that_keeps_failing_runs_out_of_retries(no_sockets):
    def broken(messages: list[Message], info: FunctionInfo) -> str:
        raise LLMServerError("down", status_code=500)

    llm = LLM.from_model(FunctionModel(broken), max_retries=1, retry_min_wait=0)
    with pytest.raises(LLMTransientError, match="gave up after 2 attempts"):
        await llm.ask([Message.user_message("hi")])


@pytest.mark.parametrize("bad", [42, Message.user_message("me"), [], ["not a call"]])
async def test_a_bad_return_is_a_developer_error(no_sockets, bad):
    llm = LLM.from_model(FunctionModel(lambda m, i: bad))
    with pytest.raises(TypeError, match="FunctionModel function"):
        await llm.ask([Message.user_message("hi")])


def test_a_tool_call_is_written_in_one_line():
    call = ToolCall.function_call("add", {"a": 2, "b": 3})
    assert call.function.name == "add" and json.loads(call.function.arguments) == {"a": 2, "b": 3}
    assert call.id.startswith("call_") and call.id != ToolCall.function_call("add").id
    assert ToolCall.function_call("x", '{"k": 1}', id="c9").model_dump() == {
        "id": "c9",
        "type": "function",
        "function": {"name": "x", "arguments": '{"k": 1}'},
    }


# ---- FunctionTransport: the wire-level double ---------------------------------------------


async def test_a_function_transport_answers_wire_requests(no_sockets):
    seen_messages: list[list[dict]] = []

    def answer(messages: list[dict], info: TransportInfo) -> str:
        seen_messages.append(messages)
        assert info.stream and info.index == 0 and info.tools is None
        return "hello from a function"

    llm = LLM.create(llm_config=SETTINGS, transport=FunctionTransport(answer))
    deltas: list[str] = []
    response = await llm.request([Message.user_message("hi")], on_delta=deltas.append)
    assert response.message.content == "hello from a function"
    assert "".join(deltas) == "hello from a function" and len(deltas) > 1
    assert response.finish_reason == "stop" and response.usage.total_tokens > 0
    assert seen_messages == [[{"role": "user", "content": "hi"}]]


async def test_a_function_transport_fails_and_answers_with_dicts(no_sockets):
    calls = {"n": 0}

    async def flaky(messages: list[dict], info: TransportInfo) -> object:
        calls["n"] += 1
        if calls["n"] == 1:
            raise LLMServerError("simulated 500", status_code=500)
        return {
            "content": None,
            "tool_calls": [
                {"id": "x", "type": "function", "function": {"name": "echo", "arguments": {"a": 1}}}
            ],
        }

    transport = FunctionTransport(flaky)
    llm = LLM.create(llm_config=SETTINGS, transport=transport)
    response = await llm.request(
        [Message.user_message("go")],
        stream=False,
        tools=[{"type": "function", "function": {"name": "echo"}}],
    )
    assert calls["n"] == 2  # retried like any transient failure
    assert json.loads(response.message.tool_calls[0].function.arguments) == {"a": 1}
    assert response.finish_reason == "tool_calls"
    assert len(transport.requests) == 2
    assert transport.requests[0]["tools"][0]["function"]["name"] == "echo"


async def test_an_agent_runs_on_a_function_transport(no_sockets):
    def turn(messages: list[dict], info: TransportInfo) -> object:
        assert info.index == 0, "terminate ends the run"
        call = ToolCall.function_call("terminate", {"status": "success"}, id="c1")
        return ModelResponse(message=Message.from_tool_calls([call], content="Finishing."))

    agent = ToolCallAgent(llm=LLM.create(llm_config=SETTINGS, transport=FunctionTransport(turn)))
    result = await agent.run("stop at once")
    assert result.steps == 1
    assert any(m.role == "tool" and m.tool_call_id == "c1" for m in agent.memory.messages)


async def test_a_bad_transport_return_is_a_developer_error(no_sockets):
    llm = LLM.create(llm_config=SETTINGS, transport=FunctionTransport(lambda m, i: 42))
    with pytest.raises(TypeError, match="must return"):
        await llm.ask([Message.user_message("hi")])
