"""What the scripted server puts on the wire for a reply: the chat-completion JSON, the event
stream's chunks, the usage block and HTTP heads. Pure functions, so the server module keeps
only connections, the script and timing (stalls, cuts, disconnects)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

from app.testing.captured import CapturedRequest
from app.testing.http import reason_phrase
from app.testing.replies import TextReply, ToolCall, ToolCallsReply, Usage

__all__ = [
    "IdentifiedCall",
    "completion_body",
    "plain_head",
    "split_arguments",
    "split_text",
    "stream_events",
    "stream_head",
    "usage_for",
]

#: A tool call of a reply with the id it goes out with.
IdentifiedCall = tuple[ToolCall, str]

_MAX_STREAM_PIECES = 32
_WORDS = re.compile(r"\S+\s*|\s+")
_SERVER = "Server: openmanus-scripted"


def split_text(value: str) -> list[str]:
    """Pieces that concatenate back to ``value``: at least two when it has 2+ characters."""
    if len(value) < 2:
        return [value] if value else []
    pieces = _WORDS.findall(value)
    if len(pieces) < 2:
        half = len(value) // 2
        return [value[:half], value[half:]]
    if len(pieces) > _MAX_STREAM_PIECES:
        step = -(-len(pieces) // _MAX_STREAM_PIECES)
        pieces = ["".join(pieces[i : i + step]) for i in range(0, len(pieces), step)]
    return pieces


def split_arguments(value: str) -> list[str]:
    """Two or three pieces of a tool call's arguments, as real servers stream them."""
    if len(value) < 2:
        return [value]
    count = 3 if len(value) >= 3 else 2
    size = -(-len(value) // count)
    return [value[i : i + size] for i in range(0, len(value), size)]


def usage_for(
    req: CapturedRequest, reply: TextReply | ToolCallsReply, calls: Sequence[IdentifiedCall]
) -> dict[str, int] | None:
    """The reply's scripted usage, else a rough count (4 characters a token)."""
    if reply.usage is False:
        return None
    if isinstance(reply.usage, Usage):
        return reply.usage.to_json()
    prompt = len(json.dumps(req.messages)) // 4
    produced = (reply.content or "") + "".join(tc.name + tc.arguments_text for tc, _ in calls)
    completion = len(produced) // 4 + 1
    return Usage(prompt, completion, prompt + completion).to_json()


def completion_body(
    reply: TextReply | ToolCallsReply,
    calls: Sequence[IdentifiedCall],
    usage: dict[str, int] | None,
    model: str,
    completion_id: str,
    created: int,
) -> bytes:
    """The JSON of a non-streamed ``chat.completion``."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.content, "refusal": None}
    if calls:
        message["tool_calls"] = [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": tc.name, "arguments": tc.wire_arguments()},
            }
            for tc, call_id in calls
        ]
    payload: dict[str, Any] = {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": reply.finish_reason}
        ],
    }
    if usage is not None:
        payload["usage"] = usage
    return json.dumps(payload).encode("utf-8")


def stream_events(
    req: CapturedRequest,
    reply: TextReply | ToolCallsReply,
    calls: Sequence[IdentifiedCall],
    usage: dict[str, int] | None,
    model: str,
    completion_id: str,
    created: int,
) -> list[bytes]:
    """Every server-sent event of a streamed answer, ``[DONE]`` included: the text in word
    pieces, each tool call's arguments in two or three pieces, the usage chunk when the
    request asked for it (``stream_options.include_usage``)."""
    options = req.body.get("stream_options") if isinstance(req.body, dict) else None
    include_usage = isinstance(options, dict) and options.get("include_usage") is True

    def chunk(delta: dict[str, Any] | None, finish: str | None = None) -> bytes:
        data: dict[str, Any] = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": []
            if delta is None
            else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        if include_usage:
            data["usage"] = usage if delta is None else None
        return b"data: " + json.dumps(data).encode("utf-8") + b"\n\n"

    events = [chunk({"role": "assistant", "content": "", "refusal": None})]
    events += [chunk({"content": piece}) for piece in split_text(reply.content or "")]
    for index, (tc, call_id) in enumerate(calls):
        opening = {
            "index": index,
            "id": call_id,
            "type": "function",
            "function": {"name": tc.name, "arguments": ""},
        }
        events.append(chunk({"tool_calls": [opening]}))
        pieces = (
            [tc.wire_arguments()]
            if tc.raw_object and tc.is_mapping
            else split_arguments(tc.arguments_text)
        )
        events += [
            chunk({"tool_calls": [{"index": index, "function": {"arguments": p}}]}) for p in pieces
        ]
    events.append(chunk({}, reply.finish_reason))
    if include_usage and usage is not None:
        events.append(chunk(None))
    events.append(b"data: [DONE]\n\n")
    return events


def _head(status: int, keep_alive: bool, fields: list[str], extra: Iterable[str] = ()) -> bytes:
    connection = f"Connection: {'keep-alive' if keep_alive else 'close'}"
    lines = [f"HTTP/1.1 {status} {reason_phrase(status)}", *fields, connection, _SERVER, *extra]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def plain_head(
    status: int,
    length: int,
    *,
    keep_alive: bool,
    content_type: str = "application/json",
    headers: Iterable[tuple[str, str]] = (),
) -> bytes:
    """The status line and headers of an answer with a body of ``length`` bytes."""
    fields = [f"Content-Type: {content_type}", f"Content-Length: {length}"]
    return _head(status, keep_alive, fields, (f"{name}: {value}" for name, value in headers))


def stream_head(*, keep_alive: bool, chunked: bool) -> bytes:
    """The status line and headers of an event stream."""
    fields = ["Content-Type: text/event-stream; charset=utf-8", "Cache-Control: no-cache"]
    return _head(200, keep_alive, fields, ["Transfer-Encoding: chunked"] if chunked else [])
