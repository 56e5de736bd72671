"""FunctionModel: an in-process model for fast unit tests (no socket is opened)."""

from __future__ import annotations

import json
import socket

import pytest

from app.agent.toolcall import ToolCallAgent
from app.config import LLMSettings
from app.exceptions import LLMServerError
from app.llm import LLM
from app.llm.model import ModelResponse
from app.schema import Message
from app.testing import FunctionInfo, FunctionModel

SETTINGS = LLMSettings(
    model="function-model", max_retries=2, retry_min_wait=0.001, retry_max_wait=0.002
)


@pytest.fixture
def no_sockets(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("a FunctionModel must not open sockets")

    monkeypatch.setattr(socket.socket, "connect", refuse)


async def test_text_answers_stream_to_the_watcher(no_sockets):
    seen_messages: list[list[dict]] = []

    def answer(messages: list[dict], info: FunctionInfo) -> str:
        seen_messages.append(messages)
        assert info.stream and info.index == 0 and info.tools is None
        return "hello from a function"

    llm = LLM.create(llm_config=SETTINGS, transport=FunctionModel(answer))
    deltas: list[str] = []
    response = await llm.request([Message.user_message("hi")], on_delta=deltas.append)
    assert response.message.content == "hello from a function"
    assert "".join(deltas) == "hello from a function" and len(deltas) > 1
    assert response.finish_reason == "stop" and response.usage.total_tokens > 0
    assert seen_messages == [[{"role": "user", "content": "hi"}]]


async def test_an_agent_runs_on_a_function_model(no_sockets):
    def turn(messages: list[dict], info: FunctionInfo) -> object:
        if info.index == 0:
            assert {t["function"]["name"] for t in info.tools} >= {"terminate"}
            return ModelResponse(
                message=Message.from_tool_calls(
                    [
                        {
                            "id": "c1",
                            "function": {
                                "name": "terminate",
                                "arguments": json.dumps({"status": "success"}),
                            },
                        }
                    ],
                    content="Finishing.",
                )
            )
        raise AssertionError("terminate ends the run")

    agent = ToolCallAgent(llm=LLM.create(llm_config=SETTINGS, transport=FunctionModel(turn)))
    result = await agent.run("stop at once")
    assert result.steps == 1
    assert any(m.role == "tool" and m.tool_call_id == "c1" for m in agent.memory.messages)


async def test_failures_and_dict_answers(no_sockets):
    calls = {"n": 0}

    async def flaky(messages: list[dict], info: FunctionInfo) -> object:
        calls["n"] += 1
        if calls["n"] == 1:
            raise LLMServerError("simulated 500", status_code=500)
        return {
            "content": None,
            "tool_calls": [
                {"id": "x", "type": "function", "function": {"name": "echo", "arguments": {"a": 1}}}
            ],
        }

    model = FunctionModel(flaky)
    llm = LLM.create(llm_config=SETTINGS, transport=model)
    response = await llm.request(
        [Message.user_message("go")],
        stream=False,
        tools=[{"type": "function", "function": {"name": "echo"}}],
    )
    assert calls["n"] == 2  # retried like any transient failure
    assert json.loads(response.message.tool_calls[0].function.arguments) == {"a": 1}
    assert response.finish_reason == "tool_calls"
    assert len(model.requests) == 2 and model.requests[0]["tools"][0]["function"]["name"] == "echo"


async def test_a_bad_return_type_is_a_developer_error(no_sockets):
    llm = LLM.create(llm_config=SETTINGS, transport=FunctionModel(lambda m, i: 42))
    with pytest.raises(TypeError, match="must return"):
        await llm.ask([Message.user_message("hi")])
