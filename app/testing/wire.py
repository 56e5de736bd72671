"""What the scripted server reads and writes: each request as captured, and for a reply the
chat-completion JSON, the event stream's chunks and the usage block. Pure functions, so the
server module keeps only connections, the script and timing (stalls, cuts, disconnects)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from app.testing.replies import TextReply, ToolCall, ToolCallsReply, Usage


@dataclass(frozen=True)
class CapturedRequest:
    """One request as the server saw it (every route, in arrival order).

    ``raw`` is the request body exactly as received; ``body`` is its JSON (``None`` when it is
    empty or not JSON). ``route`` is ``"chat"``, ``"models"`` or ``"unknown"``.
    """

    index: int
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any
    raw: bytes
    route: str = "unknown"
    received_at: float = field(default_factory=time.time)

    @property
    def messages(self) -> list[Any]:
        """The request's ``messages`` (empty when absent)."""
        value = self.body.get("messages") if isinstance(self.body, dict) else None
        return value if isinstance(value, list) else []

    @property
    def tools(self) -> list[Any] | None:
        """The request's ``tools``; ``None`` when the key was not sent at all."""
        return self.body.get("tools") if isinstance(self.body, dict) else None

    @property
    def model(self) -> str | None:
        return self.body.get("model") if isinstance(self.body, dict) else None

    @property
    def stream(self) -> bool:
        return isinstance(self.body, dict) and self.body.get("stream") is True

    def to_json(self) -> dict[str, Any]:
        """A JSON-able record (what the CLI's ``--log`` writes, one per line)."""
        return {
            "index": self.index,
            "method": self.method,
            "path": self.path,
            "query": self.query,
            "headers": self.headers,
            "body": self.body if self.body is not None else self.raw.decode("utf-8", "replace"),
            "route": self.route,
        }


#: A tool call of a reply with the id it goes out with.
IdentifiedCall = tuple[ToolCall, str]

_MAX_STREAM_PIECES = 32
_WORDS = re.compile(r"\S+\s*|\s+")


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
    """The reply's scripted usage, else a rough count (4 characters a token) of the messages
    and the tools (a real server counts the tools it puts in the prompt)."""
    if reply.usage is False:
        return None
    if isinstance(reply.usage, Usage):
        return reply.usage.to_json()
    tools = len(json.dumps(req.tools)) if req.tools else 0
    prompt = (len(json.dumps(req.messages)) + tools) // 4
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
