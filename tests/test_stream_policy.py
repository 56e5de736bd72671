"""When a turn is streamed: ``stream = "auto"`` streams watched turns and turns to a slow
endpoint, and sends plain requests to a fast one (cheaper for both ends)."""

from __future__ import annotations

import pytest

from app.exceptions import ConfigError
from app.testing import call, slow, text, tool_calls

USER = [{"role": "user", "content": "hi"}]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "echo",
            "parameters": {"type": "object", "properties": {"text": {"type": "string"}}},
        },
    }
]


def _streamed(llm_server) -> list[bool]:
    return [r.stream for r in llm_server.requests]


async def test_auto_streams_the_first_turn_then_plain_while_the_endpoint_is_fast(
    llm_server, make_llm
):
    llm_server.push(text("one"), tool_calls(call("echo", {"text": "x"})), text("three"))
    llm = make_llm()
    assert llm.settings.stream == "auto"
    assert (await llm.request(USER)).message.content == "one"
    reply = await llm.request(USER, tools=TOOLS)
    assert reply.message.tool_calls[0].function.arguments == '{"text": "x"}'
    assert (await llm.ask(USER)) == "three"
    assert _streamed(llm_server) == [True, False, False]


async def test_auto_streams_every_watched_turn(llm_server, make_llm):
    llm_server.push(text("one"), text("two"), text("three"))
    llm = make_llm()
    seen: list[str] = []
    for _ in range(2):
        await llm.request(USER, on_delta=seen.append)
    pieces = [piece async for piece in llm.ask_stream(USER)]
    assert "".join(pieces) == "three" and "".join(seen) == "onetwo"
    assert _streamed(llm_server) == [True, True, True]


async def test_auto_keeps_streaming_while_the_endpoint_is_slow(llm_server, make_llm):
    llm_server.push(slow(0.3, text("slow")), text("fast"), text("plain"))
    llm = make_llm(stream_after=0.2)
    for _ in range(3):
        await llm.request(USER)
    # The slow first turn makes the second stream too; that one was quick, so the third is plain.
    assert _streamed(llm_server) == [True, True, False]


async def test_a_plain_request_that_times_out_is_retried_streamed(llm_server, make_llm):
    llm_server.push(text("quick"), slow(5.0, text("abandoned")), text("retried"))
    llm = make_llm(timeout=0.4, max_retries=1, retry_min_wait=0.0, retry_max_wait=0.0)
    await llm.request(USER)
    assert (await llm.request(USER)).message.content == "retried"
    assert _streamed(llm_server) == [True, False, True]
    # The abandoned plain request's connection was closed (the server saw the client leave).
    assert llm_server.wait_for_disconnects(1)


@pytest.mark.parametrize(
    ("profile", "asked", "expected"),
    [
        (True, None, [True, True]),
        (False, None, [False, False]),
        (False, True, [False, False]),  # the profile's false always wins
        (True, False, [False, False]),
        ("auto", True, [True, True]),
        ("auto", False, [False, False]),
    ],
)
async def test_the_profile_and_the_caller_choose(llm_server, make_llm, profile, asked, expected):
    llm_server.push(text("a"), text("b"))
    llm = make_llm(stream=profile)
    for _ in range(2):
        await llm.request(USER, stream=asked)
    assert _streamed(llm_server) == expected


async def test_an_agent_run_without_listeners_sends_plain_turns(llm_server, make_llm):
    from app.agent.toolcall import ToolCallAgent

    llm_server.push(
        tool_calls(call("echo_missing", {"text": "x"})),
        tool_calls(call("terminate", {"status": "success"})),
    )
    agent = ToolCallAgent(llm=make_llm(), max_steps=3)
    await agent.run("go")
    assert _streamed(llm_server) == [True, False]


async def test_an_agent_run_with_listeners_streams_every_turn(llm_server, make_llm):
    from app.agent.toolcall import ToolCallAgent

    llm_server.push(text("thinking aloud"), tool_calls(call("terminate", {"status": "success"})))
    agent = ToolCallAgent(llm=make_llm(), max_steps=3, text_answer_ends_run=False)
    events = [event async for event in agent.run_stream("go")]
    assert any(type(e).__name__ == "TextDelta" for e in events)
    assert _streamed(llm_server) == [True, True]


@pytest.mark.parametrize("value", ["sometimes", 3, -1.0])
def test_bad_stream_settings_are_refused_at_load(value):
    from app.config import LLMSettings

    key = "stream_after" if isinstance(value, float) else "stream"
    with pytest.raises((ConfigError, ValueError)):
        LLMSettings(model="m", base_url="http://127.0.0.1:1/v1", api_key="k", **{key: value})


async def test_a_refused_stream_then_a_dropped_connection_is_answered_on_a_fresh_one(
    llm_server, make_llm
):
    """One retry path, the OpenAI exchange's memory kept across attempts: the streamed turn
    is refused (llama.cpp's empty event stream), its plain ask in the same attempt finds the
    connection dropped, and the retry asks plainly again (no second streamed probe) on a
    fresh connection; the refusal is remembered once the plain turn is taken."""
    from app.testing import drop, raw

    empty_stream = raw(200, b": ping\n\n", content_type="text/event-stream")
    llm_server.push(empty_stream, drop(), tool_calls(call("echo", {"text": "x"})))
    llm = make_llm(model="local", max_retries=2)
    reply = await llm.request(USER, tools=TOOLS)
    assert reply.message.tool_calls[0].function.name == "echo"
    assert _streamed(llm_server) == [True, False, False]
    assert "stream_tools" in llm.refused_features
