"""The scripted Anthropic server on its own: the wire format, the rules it enforces as the real
API does (headers, roles, tool pairing, images, thinking, breakpoints, the window), and its
prompt cache (byte-identical prefixes, the minimum length, the time to live, the lookback)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from app.testing import ScriptedLLMServer, call, error, text, tool_calls
from app.testing.anthropic_server import (
    SCRIPTED_API_KEY,
    ScriptedAnthropicServer,
)
from app.testing.replies import Reply, stream_error

HEADERS = {"x-api-key": SCRIPTED_API_KEY, "anthropic-version": "2023-06-01"}
LONG = "The system prompt says a great many things. " * 120  # about 1,500 tokens
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 32).decode()


class Clock:
    """A clock the test moves (no sleeping to let a cache entry expire)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def server(clock: Clock) -> Iterator[ScriptedAnthropicServer]:
    with ScriptedAnthropicServer(clock=clock) as started:
        started.responder = lambda request: text("ok")
        yield started


def post(
    server: ScriptedAnthropicServer,
    body: dict[str, Any],
    headers: dict[str, str] | None = None,
    path: str = "/v1/messages",
) -> httpx2.Response:
    with httpx2.Client(timeout=10) as client:
        return client.post(server.base_url + path, json=body, headers=headers or HEADERS)


def request(*messages: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"model": "claude-sonnet-4-6", "max_tokens": 1024, "messages": list(messages), **fields}


def user(*blocks: Any) -> dict[str, Any]:
    """A user turn: one string as it is, else a list of blocks."""
    if len(blocks) == 1 and isinstance(blocks[0], str):
        return {"role": "user", "content": blocks[0]}
    return {"role": "user", "content": list(blocks)}


def assistant(*blocks: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks)}


def refused(response: httpx2.Response, status: int = 400) -> str:
    """The message of an error answer, after checking its shape."""
    assert response.status_code == status, response.text
    data = response.json()
    assert data["type"] == "error" and data["request_id"].startswith("req_")
    assert response.headers["request-id"] == data["request_id"]
    return str(data["error"]["message"])


def cached(text_: str = LONG) -> dict[str, Any]:
    return {"type": "text", "text": text_, "cache_control": {"type": "ephemeral"}}


# ---- headers and versions -----------------------------------------------------------------


def test_the_key_and_the_version_are_checked(server: ScriptedAnthropicServer) -> None:
    body = request(user("hi"))
    missing = post(server, body, {"anthropic-version": "2023-06-01"})
    assert refused(missing, 401) == "x-api-key header is required"
    assert missing.json()["error"]["type"] == "authentication_error"
    wrong = post(server, body, {**HEADERS, "x-api-key": "sk-ant-nope"})
    assert refused(wrong, 401) == "invalid x-api-key"
    no_version = post(server, body, {"x-api-key": SCRIPTED_API_KEY})
    assert refused(no_version) == "anthropic-version: header is required"
    odd = post(server, body, {**HEADERS, "anthropic-version": "2099-01-01"})
    assert "not a valid version" in refused(odd)
    bearer = {"authorization": f"Bearer {SCRIPTED_API_KEY}", "anthropic-version": "2026-10-21"}
    assert post(server, body, bearer).status_code == 200  # how the SDK 2.x authenticates


def test_the_new_api_version_refuses_sampling_fields(server: ScriptedAnthropicServer) -> None:
    new = {**HEADERS, "anthropic-version": "2026-10-21"}
    for field, value in (("temperature", 1.0), ("top_p", 0.9), ("top_k", 5)):
        answer = post(server, request(user("hi"), **{field: value}), new)
        assert refused(answer) == f"{field}: Extra inputs are not permitted"
    assert post(server, request(user("hi"), temperature=0.5)).status_code == 200
    too_hot = post(server, request(user("hi"), temperature=1.5))
    assert "less than or equal to 1" in refused(too_hot)


def test_unknown_routes_and_fields_are_refused(server: ScriptedAnthropicServer) -> None:
    assert refused(post(server, request(user("hi")), path="/v1/chat/completions"), 404)
    extra = post(server, request(user("hi"), frequency_penalty=1))
    assert refused(extra) == "frequency_penalty: Extra inputs are not permitted"
    assert refused(post(server, {"model": "m", "messages": []})) == "max_tokens: Field required"
    assert len(server.requests) == 3 and server.requests[0].route == "unknown"


# ---- the conversation's rules -------------------------------------------------------------


@pytest.mark.parametrize(
    ("messages", "said"),
    [
        ([], "at least one message is required"),
        ([assistant({"type": "text", "text": "hi"})], 'first message must use the "user" role'),
        ([user("a"), user("b")], 'found multiple "user" roles in a row'),
        ([user("   ")], "must be non-empty"),
        ([user({"type": "text", "text": " "})], "non-whitespace text"),
        (
            [
                user("go"),
                assistant({"type": "tool_use", "id": "toolu_1", "name": "t", "input": {}}),
                user("no result"),
            ],
            "`tool_use` ids were found without `tool_result` blocks immediately after: toolu_1",
        ),
        (
            [user({"type": "tool_result", "tool_use_id": "toolu_9", "content": "x"})],
            "unexpected `tool_use_id` found in `tool_result` blocks: toolu_9",
        ),
        (
            [
                user("go"),
                assistant({"type": "tool_use", "id": "toolu_1", "name": "t", "input": {}}),
                user(
                    {"type": "text", "text": "first"},
                    {"type": "tool_result", "tool_use_id": "toolu_1"},
                ),
            ],
            "tool_result blocks must come first",
        ),
        ([user({"type": "thinking", "thinking": "x", "signature": "y"})], "in a user message"),
        (
            [
                user(
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/jpeg", "data": PNG},
                    }
                )
            ],
            "specified using the image/jpeg media type, but the image appears to be a image/png",
        ),
    ],
)
def test_the_api_rules_are_enforced(
    server: ScriptedAnthropicServer, messages: list[dict[str, Any]], said: str
) -> None:
    assert said in refused(post(server, request(*messages)))
    assert server.cache_uses == []  # refused before taking a reply


def test_tools_and_tool_choice_are_checked(server: ScriptedAnthropicServer) -> None:
    tool = {"name": "add", "input_schema": {"type": "object"}}
    assert post(server, request(user("x"), tools=[tool])).status_code == 200
    twice = post(server, request(user("x"), tools=[tool, tool]))
    assert refused(twice) == "tools: Tool names must be unique."
    bad_name = post(server, request(user("x"), tools=[{**tool, "name": "a b"}]))
    assert "String should match pattern" in refused(bad_name)
    choice = post(
        server, request(user("x"), tools=[tool], tool_choice={"type": "tool", "name": "z"})
    )
    assert "Tool 'z' not found" in refused(choice)


def test_thinking_blocks_must_come_back_as_issued(server: ScriptedAnthropicServer) -> None:
    server.responder = None
    tool = {"name": "add", "input_schema": {"type": "object"}}
    thinking = {"type": "enabled", "budget_tokens": 1024}
    server.push(tool_calls(call("add", {}), thinking="Adding.", redacted_thinking="hidden"))
    first = post(server, request(user("1+1"), tools=[tool], thinking=thinking, max_tokens=2048))
    blocks = first.json()["content"]
    assert [b["type"] for b in blocks] == ["thinking", "redacted_thinking", "tool_use"]
    assert "hidden" not in blocks[1]["data"]
    result = user({"type": "tool_result", "tool_use_id": blocks[2]["id"], "content": "2"})

    def again(turn: list[dict[str, Any]], **fields: Any) -> httpx2.Response:
        server.push(text("2"))
        body = request(user("1+1"), assistant(*turn), result, tools=[tool], **fields)
        return post(server, body)

    with_thinking = {"thinking": thinking, "max_tokens": 2048}
    assert again(blocks, **with_thinking).status_code == 200
    changed = [{**blocks[0], "thinking": "Subtracting."}, *blocks[1:]]
    assert "Invalid `signature` in `thinking` block" in refused(again(changed, **with_thinking))
    forged = [blocks[0], {"type": "redacted_thinking", "data": "Zm9yZ2Vk"}, blocks[2]]
    assert "Invalid `data` in `redacted_thinking` block" in refused(again(forged, **with_thinking))
    missing = refused(again(blocks[2:], **with_thinking))
    assert "a final `assistant` message must start with a thinking block" in missing
    assert again(blocks[2:]).status_code == 200  # thinking off: none needed
    hot = refused(again(blocks, **with_thinking, temperature=0.5))
    assert "`temperature` may only be set to 1" in hot
    forced = {**with_thinking, "tool_choice": {"type": "any"}}
    assert "tool_choice forces tool use" in refused(again(blocks, **forced))


def test_a_prompt_above_the_window_is_too_long_in_the_apis_words(clock: Clock) -> None:
    with ScriptedAnthropicServer([text("never")], context_window=1000, clock=clock) as small:
        answer = post(small, request(user("word " * 2000)))
        message = refused(answer)
        assert message.startswith("prompt is too long: ") and message.endswith(
            " tokens > 1000 maximum"
        )
        close = post(small, request(user("word " * 300), max_tokens=900))
        assert "input length and `max_tokens` exceed context limit" in refused(close)
        assert small.remaining == 1


# ---- the prompt cache ---------------------------------------------------------------------


def usage_of(response: httpx2.Response) -> dict[str, int]:
    assert response.status_code == 200, response.text
    return response.json()["usage"]


def test_a_marked_prefix_is_written_then_read(server: ScriptedAnthropicServer) -> None:
    body = request(user("question one"), system=[cached()])
    first = usage_of(post(server, body))
    assert first["cache_read_input_tokens"] == 0
    assert first["cache_creation_input_tokens"] > 1024 and first["input_tokens"] > 0
    second = usage_of(post(server, {**body, "messages": [user("another question")]}))
    assert second["cache_read_input_tokens"] == first["cache_creation_input_tokens"]
    assert second["cache_creation_input_tokens"] == 0


def test_one_changed_byte_misses_the_cache(server: ScriptedAnthropicServer) -> None:
    usage_of(post(server, request(user("q"), system=[cached()])))
    changed = usage_of(post(server, request(user("q"), system=[cached(LONG[:-1] + "!")])))
    assert changed["cache_read_input_tokens"] == 0 and changed["cache_creation_input_tokens"]
    other_model = request(user("q"), system=[cached()], model="claude-other")
    assert usage_of(post(server, other_model))["cache_read_input_tokens"] == 0


def test_a_prefix_below_the_minimum_is_not_cached(server: ScriptedAnthropicServer) -> None:
    short = request(user("q"), system=[cached("A short system prompt.")])
    for _ in range(2):
        use = usage_of(post(server, short))
        assert use["cache_creation_input_tokens"] == use["cache_read_input_tokens"] == 0
    assert len(server.cache) == 0


def test_entries_expire_after_their_time_to_live(
    server: ScriptedAnthropicServer, clock: Clock
) -> None:
    body = request(user("q"), system=[cached()])
    usage_of(post(server, body))
    clock.now += 299
    assert usage_of(post(server, body))["cache_read_input_tokens"] > 0  # and refreshed
    clock.now += 299
    assert usage_of(post(server, body))["cache_read_input_tokens"] > 0
    clock.now += 301
    assert usage_of(post(server, body))["cache_read_input_tokens"] == 0
    hour = request(
        user("q"), system=[{**cached(), "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
    )
    usage_of(post(server, hour))
    clock.now += 3000
    assert usage_of(post(server, hour))["cache_read_input_tokens"] > 0


def test_a_later_mark_reads_an_earlier_entry_within_twenty_blocks(
    server: ScriptedAnthropicServer,
) -> None:
    turns = [user({"type": "text", "text": LONG, "cache_control": {"type": "ephemeral"}})]
    usage_of(post(server, request(*turns)))
    near = [
        user({"type": "text", "text": LONG}, *[{"type": "text", "text": f"b{i}"} for i in range(5)])
    ]
    near[0]["content"][-1]["cache_control"] = {"type": "ephemeral"}
    use = usage_of(post(server, request(*near)))
    assert use["cache_read_input_tokens"] > 1024 and use["cache_creation_input_tokens"] > 0
    far = [
        user(
            {"type": "text", "text": LONG}, *[{"type": "text", "text": f"c{i}"} for i in range(25)]
        )
    ]
    far[0]["content"][-1]["cache_control"] = {"type": "ephemeral"}
    assert usage_of(post(server, request(*far)))["cache_read_input_tokens"] == 0


def test_at_most_four_breakpoints(server: ScriptedAnthropicServer) -> None:
    four = request(user(*[cached(f"part {i}") for i in range(4)]))
    assert post(server, four).status_code == 200
    five = request(user(*[cached(f"part {i}") for i in range(5)]))
    message = refused(post(server, five))
    assert message == "A maximum of 4 blocks with cache_control may be provided. Found 5."


def test_count_tokens_counts_without_answering(server: ScriptedAnthropicServer) -> None:
    body = request(user("how long is this?"), system=[cached()])
    del body["max_tokens"]
    counted = post(server, body, path="/v1/messages/count_tokens")
    assert counted.status_code == 200 and counted.json()["input_tokens"] > 1024
    assert server.cache_uses == [] and len(server.cache) == 0


# ---- answers ------------------------------------------------------------------------------


def events_of(response: httpx2.Response) -> list[tuple[str, dict[str, Any]]]:
    found = []
    for chunk in response.text.split("\n\n"):
        if chunk.strip():
            name, data = chunk.split("\n", 1)
            found.append((name.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
    return found


def test_a_stream_has_the_apis_events_in_order(server: ScriptedAnthropicServer) -> None:
    server.responder = None
    server.push(tool_calls(call("add", {"a": 1}), content="Calling."))
    tool = {"name": "add", "input_schema": {"type": "object"}}
    answer = post(server, request(user("x"), tools=[tool], stream=True))
    assert answer.headers["content-type"].startswith("text/event-stream")
    events = events_of(answer)
    names = [name for name, _ in events]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    assert "ping" in names and names.count("content_block_start") == 2
    deltas = [data["delta"] for name, data in events if name == "content_block_delta"]
    assert "".join(d["text"] for d in deltas if d["type"] == "text_delta") == "Calling."
    arguments = "".join(d["partial_json"] for d in deltas if d["type"] == "input_json_delta")
    assert json.loads(arguments) == {"a": 1}
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use"
    assert events[0][1]["message"]["usage"]["input_tokens"] > 0


def test_an_error_event_ends_a_stream(server: ScriptedAnthropicServer) -> None:
    server.responder = None
    server.push(stream_error(529, reply=text("one two three"), after=2), stream_error(429))
    answer = post(server, request(user("x"), stream=True))
    assert answer.status_code == 200
    name, data = events_of(answer)[-1]
    assert name == "error" and data["error"]["type"] == "overloaded_error"
    assert refused(post(server, request(user("x"))), 429)  # a plain request: HTTP status


def test_an_empty_script_is_a_clear_400(clock: Clock) -> None:
    with ScriptedAnthropicServer(clock=clock) as empty:
        assert "script exhausted" in refused(post(empty, request(user("x"))))


def test_scripted_errors_carry_the_apis_error_types(server: ScriptedAnthropicServer) -> None:
    server.responder = None
    server.push(error(429, headers={"retry-after": "3"}), error(529), error(401))
    limited = post(server, request(user("x")))
    assert limited.json()["error"]["type"] == "rate_limit_error"
    assert limited.headers["retry-after"] == "3"
    assert post(server, request(user("x"))).json()["error"]["type"] == "overloaded_error"
    assert post(server, request(user("x"))).json()["error"]["type"] == "authentication_error"


# ---- the script objects -------------------------------------------------------------------


def test_thinking_replies_round_trip_through_json() -> None:
    for reply in (
        text("a", thinking="t", redacted_thinking="r"),
        tool_calls(call("f", {"x": 1}), thinking="why"),
        stream_error(error(529), reply=text("half"), after=2),
    ):
        assert Reply.from_json(json.loads(json.dumps(reply.to_json()))) == reply
    assert "thinking" not in text("plain").to_json()  # old scripts read and write as before


def test_the_openai_server_answers_a_thinking_reply_as_plain_text() -> None:
    with ScriptedLLMServer([text("hello", thinking="hmm")]) as openai_server:
        with httpx2.Client(timeout=10) as client:
            answer = client.post(
                openai_server.base_url + "/chat/completions",
                json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
            )
    message = answer.json()["choices"][0]["message"]
    assert message["content"] == "hello" and "hmm" not in answer.text
