"""Hostile and broken replies: each is an ``LLMResponseError`` at the adapter edge (retried a
bounded number of times), or a value the agent shows the model, never a traceback out of
``run()``. Also: legacy ``function_call``, reasoning kept out of the answer, finish reasons,
and text tool calling."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.agent.toolcall import ToolCallAgent
from app.exceptions import LLMError, LLMResponseError
from app.llm.retry import MAX_RESPONSE_RETRIES
from app.schema import Message
from app.testing import call, raw, text, tool_calls

USER = [Message.user_message("hi")]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "echo",
            "description": "Say something back.",
            "parameters": {
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"],
            },
        },
    }
]
DEEP = "[" * 100_000 + "]" * 100_000


def completion(message: Any, **extra: Any) -> bytes:
    return json.dumps(
        {
            "id": "x",
            "object": "chat.completion",
            "model": "m",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            **extra,
        }
    ).encode()


def event_stream(*chunks: Any, done: bool = True) -> bytes:
    body = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)
    return body + (b"data: [DONE]\n\n" if done else b"")


def chunk(delta: Any, finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


HOSTILE_BODIES = [
    pytest.param(b"{not json", "invalid JSON", id="invalid-json"),
    pytest.param(b"[1, 2, 3]", "not an object", id="a-list"),
    pytest.param(DEEP.encode(), "nested too deeply", id="body-nested-100k"),
    pytest.param(completion(None), "message is null", id="null-message"),
    pytest.param(json.dumps({"choices": "many"}).encode(), "no choices", id="choices-not-list"),
    pytest.param(json.dumps({"choices": ["x"]}).encode(), "not an object", id="choice-str"),
    pytest.param(
        completion({"role": "assistant", "tool_calls": "echo"}),
        "tool_calls is a str",
        id="tool-calls-not-list",
    ),
    pytest.param(
        completion({"role": "assistant", "tool_calls": ["echo", 3]}),
        "tool call is not an object",
        id="tool-call-not-object",
    ),
    pytest.param(
        completion({"role": "assistant", "tool_calls": [{"function": 7}]}),
        "no 'function' object",
        id="function-not-object",
    ),
    pytest.param(
        completion(
            {
                "role": "assistant",
                "tool_calls": [{"id": "c", "function": {"name": ["echo"], "arguments": "{}"}}],
            }
        ),
        "name is not text",
        id="name-not-text",
    ),
    pytest.param(
        completion({"role": "assistant", "content": {"text": "hi"}}),
        "content is a dict",
        id="content-object",
    ),
    pytest.param(
        completion({"role": "assistant", "content": 42}), "content is a int", id="content-number"
    ),
    pytest.param(
        event_stream(chunk({"content": 5}, "stop")).replace(b"", b""),
        "not text",
        id="stream-content-number",
    ),
    pytest.param(event_stream({"choices": {"0": 1}}), "not a list", id="stream-choices-dict"),
    pytest.param(
        event_stream(chunk({"tool_calls": {"index": 0}})), "not a list", id="stream-tool-calls-dict"
    ),
    pytest.param(
        event_stream(chunk({"tool_calls": ["x"]})), "not an object", id="stream-tool-call-str"
    ),
    pytest.param(
        b"data: " + DEEP.encode() + b"\n\n", "nested too deeply", id="stream-chunk-nested-100k"
    ),
    pytest.param(b"data: {oops\n\n", "invalid JSON", id="stream-invalid-json"),
    pytest.param(event_stream(7), "expected an object", id="stream-chunk-number"),
]


@pytest.mark.parametrize(("body", "words"), HOSTILE_BODIES)
async def test_a_hostile_reply_is_a_response_error(llm_server, make_llm, body, words):
    streamed = body.startswith(b"data:")
    reply = raw(200, body, content_type="text/event-stream" if streamed else "application/json")
    llm_server.push(*[reply] * (MAX_RESPONSE_RETRIES + 2))
    with pytest.raises(LLMResponseError) as info:
        await make_llm(max_retries=5).request(USER, tools=TOOLS, stream=streamed)
    assert words in str(info.value)
    assert "gpt-4o-mini" in str(info.value)
    # Retried, but a bounded number of times (not the whole max_retries budget).
    assert len(llm_server.requests) == MAX_RESPONSE_RETRIES + 1


async def test_a_hostile_reply_is_retried_and_then_answered(llm_server, make_llm):
    llm_server.push(raw(200, completion(None)), text("fine now"))
    response = await make_llm().request(USER, stream=False)
    assert response.message.content == "fine now"


async def test_a_hostile_json_answer_to_a_streamed_request_is_asked_again(llm_server, make_llm):
    llm_server.push(raw(200, completion(None)), text("fine now"))
    response = await make_llm().request(USER)
    assert response.message.content == "fine now"
    assert [r.stream for r in llm_server.requests] == [True, False]


@pytest.mark.parametrize(("body", "words"), HOSTILE_BODIES[:6])
async def test_an_agent_run_survives_hostile_replies(llm_server, make_llm, body, words):
    llm_server.push(*[raw(200, body)] * (MAX_RESPONSE_RETRIES + 1))
    result = await ToolCallAgent(llm=make_llm()).run("hi")
    assert isinstance(result.error, LLMError)


async def test_arguments_nested_100k_deep_go_back_to_the_model(llm_server, make_llm):
    """Valid JSON text, but deeper than any parser goes: the call is kept verbatim, the
    agent reports unusable arguments to the model, and the run goes on."""
    llm_server.push(tool_calls(call("terminate", DEEP)), text("recovered"))
    agent = ToolCallAgent(llm=make_llm())
    result = await agent.run("hi")
    assert result.final_answer == "recovered"
    tool_result = next(m for m in agent.memory.messages if m.role == "tool")
    assert "nested too deeply" in tool_result.content or "not usable" in tool_result.content


def test_argument_helpers_never_raise_recursion_errors():
    from app.llm.arguments import normalize_arguments, parse_arguments

    assert normalize_arguments(DEEP) == DEEP
    with pytest.raises(ValueError, match="nested too deeply"):
        parse_arguments(DEEP)
    with pytest.raises(ValueError):
        parse_arguments(json.dumps(DEEP))


# --- legacy function_call, finish reasons, reasoning --------------------------------------


async def test_legacy_function_call_becomes_a_tool_call(llm_server, make_llm):
    llm_server.push(
        raw(
            200,
            completion(
                {
                    "role": "assistant",
                    "content": None,
                    "function_call": {"name": "echo", "arguments": '{"text": "x"}'},
                }
            ),
        )
    )
    response = await make_llm().request(USER, tools=TOOLS, stream=False)
    (only,) = response.message.tool_calls
    assert only.function.name == "echo" and json.loads(only.function.arguments) == {"text": "x"}
    assert only.id.startswith("call_")


async def test_an_empty_tool_name_is_kept_for_the_agent_to_answer(llm_server, make_llm):
    """llama.cpp may send a legacy function_call with an empty name: kept (the agent answers
    "unknown tool" so the model can correct itself), never dropped silently."""
    llm_server.push(
        raw(
            200, completion({"role": "assistant", "function_call": {"name": "", "arguments": "{}"}})
        ),
        text("done"),
    )
    agent = ToolCallAgent(llm=make_llm())
    result = await agent.run("hi")
    assert result.final_answer == "done"
    (call_message,) = [m for m in agent.memory.messages if m.tool_calls]
    assert call_message.tool_calls[0].function.name == ""
    tool_result = next(m for m in agent.memory.messages if m.role == "tool")
    assert tool_result.content.startswith("Error")


@pytest.mark.parametrize("stream", [True, False])
async def test_finish_reason_is_always_carried(llm_server, make_llm, stream):
    llm_server.push(text("cut", finish_reason="length"), tool_calls(call("echo", {"text": "a"})))
    llm = make_llm()
    first = await llm.request(USER, stream=stream)
    second = await llm.request(USER, tools=TOOLS, stream=stream)
    assert (first.finish_reason, first.truncated) == ("length", True)
    assert second.finish_reason == "tool_calls"
    assert [r.stream for r in llm_server.requests] == [stream, stream]


@pytest.mark.parametrize("stream", [True, False])
async def test_reasoning_is_kept_out_of_the_answer(llm_server, make_llm, stream):
    llm_server.push(text("<think>The user greets me.</think>Hello there!"))
    seen: list[str] = []
    response = await make_llm().request(USER, on_delta=seen.append, stream=stream)
    assert response.message.content == "Hello there!"
    assert response.reasoning == "The user greets me."
    assert "".join(seen) == "Hello there!"


async def test_reasoning_content_field_and_stream(llm_server, make_llm):
    llm_server.push(
        raw(
            200, completion({"role": "assistant", "content": "4", "reasoning_content": "2+2 is 4"})
        ),
        raw(
            200,
            event_stream(
                chunk({"reasoning_content": "thinking..."}),
                chunk({"content": "answer"}),
                chunk({}, "stop"),
            ),
            content_type="text/event-stream",
        ),
    )
    llm = make_llm()
    plain = await llm.request(USER, stream=False)
    streamed = await llm.request(USER, stream=True)
    assert (plain.message.content, plain.reasoning) == ("4", "2+2 is 4")
    assert (streamed.message.content, streamed.reasoning) == ("answer", "thinking...")


@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"], ids=["lf", "crlf", "cr"])
async def test_stream_lines_split_only_where_sse_says(llm_server, make_llm, newline):
    """Events end at CR, LF or CRLF, nowhere else: a JSON string holding a raw U+2028 or
    U+0085 (servers that send UTF-8 unescaped) stays whole; a last event without its blank
    line still counts."""
    pieces = ["caf\u00e9 \u2028line", " next\u0085end", " \U0001f600"]
    events = [json.dumps(chunk({"content": p}), ensure_ascii=False).encode() for p in pieces]
    events.append(json.dumps(chunk({}, "stop")).encode())
    body = b"".join(b"data: " + e + newline + newline for e in events) + b"data: [DONE]"
    llm_server.push(raw(200, body, content_type="text/event-stream"))
    seen: list[str] = []
    response = await make_llm().request(USER, on_delta=seen.append)
    assert response.message.content == "".join(pieces)
    assert seen == pieces


async def test_reasoning_is_never_sent_back(llm_server, make_llm):
    llm_server.push(text("<think>secret plan</think>I will help."), text("ok"))
    agent = ToolCallAgent(llm=make_llm(), text_answer_ends_run=False, max_steps=2)
    await agent.run("hi")
    sent = json.dumps(llm_server.requests[1].body["messages"])
    assert "secret plan" not in sent and "I will help." in sent


# --- text tool calling -----------------------------------------------------------------------


async def test_text_mode_describes_tools_and_parses_calls(llm_server, make_llm):
    llm_server.push(
        text('Let me echo.\n<tool_call>{"name": "echo", "arguments": {"text": "hi"}}</tool_call>'),
        text("All done."),
    )
    llm = make_llm(tool_calling="text")
    history = [Message.system_message("You are helpful."), Message.user_message("echo hi")]
    first = await llm.request(history[1:], history[:1], tools=TOOLS)
    body = llm_server.requests[0].body
    assert "tools" not in body and "tool_choice" not in body
    assert body["messages"][0]["role"] == "system"
    assert "You are helpful." in body["messages"][0]["content"]
    assert (
        "echo" in body["messages"][0]["content"] and "<tool_call>" in body["messages"][0]["content"]
    )
    (echo,) = first.message.tool_calls
    assert echo.function.name == "echo" and json.loads(echo.function.arguments) == {"text": "hi"}
    assert first.message.content == "Let me echo." and first.finish_reason == "tool_calls"
    # The call and its result go back as text: no tool role, no tool_calls on the wire.
    history += [first.message, Message.tool_message("hi", name="echo", tool_call_id=echo.id)]
    await llm.request(history[1:], history[:1], tools=TOOLS)
    sent = llm_server.requests[1].body["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert "<tool_call>" in sent[2]["content"] and "tool_calls" not in sent[2]
    assert "<tool_response" in sent[3]["content"] and "hi" in sent[3]["content"]


async def test_auto_mode_switches_to_text_when_tools_are_refused(llm_server, make_llm):
    from app.testing import error

    llm_server.push(
        error(400, "registry.ollama.ai/library/gemma3 does not support tools"),
        text('<tool_call>{"name": "echo", "arguments": {"text": "x"}}</tool_call>'),
        text('<tool_call>{"name": "echo", "arguments": {"text": "y"}}</tool_call>'),
    )
    first = await make_llm().request(USER, tools=TOOLS)
    assert first.message.tool_calls[0].function.name == "echo"
    assert "tools" in llm_server.requests[0].body and "tools" not in llm_server.requests[1].body
    # Remembered: a new instance goes straight to text mode.
    again = await make_llm().request(USER, tools=TOOLS)
    assert json.loads(again.message.tool_calls[0].function.arguments) == {"text": "y"}
    assert len(llm_server.requests) == 3 and "tools" not in llm_server.requests[2].body


async def test_native_mode_reports_the_refusal(llm_server, make_llm):
    from app.exceptions import ToolsNotSupportedError
    from app.testing import error

    llm_server.push(error(400, "this model does not support tools"))
    with pytest.raises(ToolsNotSupportedError, match="tool_calling"):
        await make_llm(tool_calling="native").request(USER, tools=TOOLS)
