"""The request hot path reuses work: each message is formatted, encoded and counted once, and a
growing conversation resumes formatting where the last request left off. Whatever is cached,
a request must say exactly what a fresh pass over fresh copies would say, edits included."""

from __future__ import annotations

import copy
import json
from typing import Any

from app.llm.openai.formatting import prepare_messages
from app.llm.openai.messages import format_messages
from app.llm.openai.wire import count_tokens, dumps, wire_entry
from app.schema import Function, Message, ToolCall
from app.testing import call, tool_calls
from app.tokens import TokenCounter

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgAAIAAAUAAR4f7BQAAAAASUVORK5CYII="


def _assistant(*ids: str) -> Message:
    return Message.from_tool_calls(
        [
            ToolCall(id=i, function=Function(name="echo", arguments=f'{{"text": "{i}"}}'))
            for i in ids
        ],
        content="",
    )


def _tool(call_id: str, image: str | None = None) -> Message:
    return Message.tool_message(
        f"out {call_id}", name="echo", tool_call_id=call_id, base64_image=image
    )


def _fresh(messages: list[Any], **kwargs: Any) -> Any:
    """A pass over deep copies: new objects, so nothing cached can be reused."""
    return prepare_messages(copy.deepcopy(messages), **kwargs)


def _same(a: Any, b: Any) -> None:
    assert a.messages == b.messages
    assert [json.loads(f) for f in a.fragments] == [json.loads(f) for f in b.fragments]
    assert a.omitted == b.omitted


def test_growing_conversation_matches_fresh_pass_at_every_step():
    system = [Message.system_message("sys")]
    conversation: list[Message] = [Message.user_message("task")]
    nxt = Message.user_message("next?")
    growth = [
        [_assistant("a1"), _tool("a1")],
        [_assistant("b1", "b2"), _tool("b1", image=PNG)],  # b2 unanswered: stub
        [Message.assistant_message("thinking")],
        [_tool("orphan")],  # dropped
        [Message.user_message("look", base64_image=PNG)],
        [_assistant("c1"), _tool("c1"), Message.user_message("more")],
    ]
    for supports_images in (True, False):
        convo = list(conversation)
        for added in growth:
            convo.extend(added)
            request = [*convo, nxt]
            for _ in range(2):  # the second request resumes from the first one's snapshot
                got = prepare_messages(
                    request, system=system, supports_images=supports_images, model="m"
                )
                want = _fresh([*system, *request], supports_images=supports_images, model="m")
                _same(got, want)


def test_the_next_step_resumes_instead_of_starting_over():
    convo = [Message.user_message("task"), _assistant("x"), _tool("x")]
    prepare_messages([*convo, Message.user_message("p")])
    snapshot = wire_entry(convo[0]).snapshot
    assert snapshot is not None and len(snapshot.inputs) == 3
    convo += [_assistant("y"), _tool("y")]
    prepare_messages([*convo, Message.user_message("p")])
    assert len(wire_entry(convo[0]).snapshot.inputs) == 5


def test_edits_after_a_request_are_sent():
    convo = [Message.user_message("task"), _assistant("x"), _tool("x"), _assistant("y"), _tool("y")]
    nxt = Message.user_message("p")
    prepare_messages([*convo, nxt])

    convo[2].content = "edited result"  # field assignment
    convo[1].tool_calls[0].function.arguments = '{"text": "changed"}'  # nested, in place
    convo[3].tool_calls.append(ToolCall(id="z", function=Function(name="echo")))  # list grows
    got = prepare_messages([*convo, nxt])
    _same(got, _fresh([*convo, nxt]))
    wire = got.messages
    assert wire[2]["content"] == "edited result"
    assert wire[1]["tool_calls"][0]["function"]["arguments"] == '{"text": "changed"}'
    assert [c["id"] for c in wire[3]["tool_calls"]] == ["y", "z"]
    assert wire[5]["tool_call_id"] == "z"  # the new call gets a stub result


def test_replaced_and_copied_messages_are_sent_as_they_are_now():
    convo = [Message.user_message("task"), _assistant("x"), _tool("x")]
    prepare_messages([*convo, Message.user_message("p")])
    convo[2] = convo[2].model_copy(update={"content": "copy"})
    convo[0] = Message.user_message("another task")
    got = prepare_messages([*convo, Message.user_message("p")])
    assert got.messages[0]["content"] == "another task"
    assert got.messages[2]["content"] == "copy"


def test_public_format_messages_returns_copies_the_caller_may_change():
    convo = [Message.user_message("task"), _assistant("x"), _tool("x")]
    first, _ = format_messages(convo)
    first[0]["content"] = "scribbled"
    first[1]["tool_calls"][0]["function"]["name"] = "scribbled"
    second, _ = format_messages(convo)
    assert second[0]["content"] == "task"
    assert second[1]["tool_calls"][0]["function"]["name"] == "echo"


def test_caching_does_not_change_equality():
    a, b = Message.user_message("same"), Message.user_message("same")
    prepare_messages([a])
    assert a == b and a != Message.user_message("other")


def test_empty_tool_call_list_is_not_sent():
    message = Message(role="assistant", content="hi", tool_calls=[])
    assert prepare_messages([message]).messages == [{"role": "assistant", "content": "hi"}]


def test_undecodable_text_is_sent_as_escapes_not_an_error():
    text = "bad \udcff byte"
    encoded = dumps({"content": text})
    assert json.loads(encoded) == {"content": text}
    assert encoded.isascii()


def test_token_counts_are_cached_per_message_and_follow_edits():
    counter = TokenCounter("gpt-4o-mini", load_timeout=0.0)
    counter.load()
    convo = [Message.user_message("count these words"), _assistant("x"), _tool("x")]
    formatted = prepare_messages(convo)
    total = count_tokens(counter, formatted.messages, formatted.entries)
    assert total == counter.count_messages(format_messages(convo)[0])
    assert all(wire_entry(m).tokens is not None for m in convo)

    convo[0].content = "a much longer text than before, with quite a few more words in it"
    formatted = prepare_messages(convo)
    assert (
        count_tokens(counter, formatted.messages, formatted.entries)
        == counter.count_messages(format_messages(convo)[0])
        > total
    )


async def test_requests_on_the_wire_match_the_fresh_format(llm_server, make_llm):
    """End to end: what the server receives is what a fresh pass produces, step after step,
    with the JSON content type and bearer auth of the SDK."""
    llm = make_llm()
    tools = [{"type": "function", "function": {"name": "echo", "parameters": {}}}]
    system = [Message.system_message("sys")]
    convo = [Message.user_message("task ✓")]
    for step in range(3):
        llm_server.push(tool_calls(call("echo", {"text": str(step)})))
        reply = await llm.ask_tool(
            [*convo, Message.user_message("next")], system_msgs=system, tools=tools
        )
        sent = llm_server.requests[-1]
        want, _ = format_messages([*system, *convo, Message.user_message("next")])
        assert sent.messages == want
        assert sent.tools == tools and sent.body["tool_choice"] == "auto"
        assert sent.headers["content-type"] == "application/json"
        assert sent.headers["authorization"].startswith("Bearer ")
        convo += [reply, _tool(reply.tool_calls[0].id)]
    await llm.aclose()
