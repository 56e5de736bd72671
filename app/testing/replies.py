"""What the scripted server answers: small immutable reply objects, serialisable to JSON.

A script is a list of these. Each one can round-trip through ``to_json()`` / ``from_json()`` so
that end-to-end tests can keep a script in a JSON file and hand it to the server's CLI. Plain
strings in a script mean :func:`text` replies, which keeps short scripts short.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any, ClassVar


@dataclass(frozen=True)
class Usage:
    """Token counts reported with a success reply (fixed, so tests can assert accounting)."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int

    def to_json(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Usage:
        prompt = int(data.get("prompt_tokens", 0))
        completion = int(data.get("completion_tokens", 0))
        total = int(data.get("total_tokens", prompt + completion))
        return cls(prompt, completion, total)


#: ``None`` = estimate from the request, ``False`` = report no usage at all, else fixed counts.
UsageSpec = Usage | bool | None


def _usage_spec(value: Any) -> UsageSpec:
    if value is None or value is False or isinstance(value, Usage):
        return value
    if value is True:
        return None
    if isinstance(value, Mapping):
        return Usage.from_json(value)
    raise TypeError(f"usage must be None, False, a Usage or a mapping, not {type(value).__name__}")


def _field_json(value: Any) -> Any:
    if isinstance(value, Reply | ToolCall | Usage):
        return value.to_json()
    if isinstance(value, tuple):  # tool calls, or header pairs
        return (
            [v.to_json() for v in value]
            if value and isinstance(value[0], ToolCall)
            else dict(value)
        )
    return value


class Reply:
    """Base of every scripted reply; ``Reply.from_json`` rebuilds any kind from its JSON."""

    kind: ClassVar[str] = ""

    def to_json(self) -> dict[str, Any]:
        """The reply's kind and every field that differs from its default."""
        data: dict[str, Any] = {"type": self.kind}
        for item in fields(self):  # type: ignore[arg-type]  # every subclass is a dataclass
            value = getattr(self, item.name)
            if value != item.default:
                data[item.name] = _field_json(value)
        return data

    @classmethod
    def from_json(cls, data: Any) -> Reply:
        """Rebuild a reply from ``to_json()`` output (a bare string means a text reply)."""
        if isinstance(data, str):
            return TextReply(content=data)
        if not isinstance(data, Mapping):
            raise ValueError(f"a scripted reply must be a JSON object or string, got {data!r}")
        kind = data.get("type")
        read = _READERS.get(kind) if isinstance(kind, str) else None
        if read is None:
            known = ", ".join(sorted(_READERS))
            raise ValueError(f"unknown scripted reply type {kind!r} (expected one of: {known})")
        reply = read(data)
        if not isinstance(reply, cls):
            raise ValueError(f"expected a {cls.kind!r} reply, got {kind!r}")
        return reply


@dataclass(frozen=True)
class TextReply(Reply):
    """A plain assistant message."""

    kind: ClassVar[str] = "text"

    content: str
    usage: UsageSpec = None
    finish_reason: str = "stop"
    #: The model's thinking before the answer (servers that speak a thinking API send it
    #: when the request enables thinking: ``ScriptedAnthropicServer``; the OpenAI one ignores it).
    thinking: str | None = None
    #: A redacted thinking block's content (sent encrypted, as the real API does).
    redacted_thinking: str | None = None


@dataclass(frozen=True)
class ToolCall:
    """One function call; the arguments are fixed as text at construction time.

    ``arguments_text`` is exactly what goes on the wire (unless ``raw_object``), so a script
    that cannot be serialised fails when it is written, not in the middle of a test.
    """

    name: str
    arguments_text: str
    is_mapping: bool = True
    raw_object: bool = False
    id: str | None = None

    @property
    def arguments(self) -> Any:
        """The arguments as given: a fresh dict for mappings, the verbatim string otherwise."""
        return json.loads(self.arguments_text) if self.is_mapping else self.arguments_text

    def wire_arguments(self) -> Any:
        """The value of ``function.arguments`` in a response."""
        if self.raw_object and self.is_mapping:
            return json.loads(self.arguments_text)
        return self.arguments_text

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "arguments": self.arguments}
        if self.raw_object:
            data["raw_object"] = True
        if self.id is not None:
            data["id"] = self.id
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ToolCall:
        if not isinstance(data, Mapping) or "name" not in data:
            raise ValueError(f"a scripted tool call needs at least a name, got {data!r}")
        return call(
            str(data["name"]),
            data.get("arguments", {}),
            id=data.get("id"),
            raw_object=bool(data.get("raw_object", False)),
        )


@dataclass(frozen=True)
class ToolCallsReply(Reply):
    """An assistant message carrying tool calls (optionally with some text)."""

    kind: ClassVar[str] = "tool_calls"

    calls: tuple[ToolCall, ...]
    content: str | None = None
    usage: UsageSpec = None
    finish_reason: str = "tool_calls"
    #: As on :class:`TextReply`.
    thinking: str | None = None
    redacted_thinking: str | None = None


_DEFAULT_ERRORS: dict[int, tuple[str, str, str | None]] = {
    400: ("The request was rejected by the scripted server.", "invalid_request_error", None),
    401: ("Invalid API key (scripted).", "invalid_request_error", "invalid_api_key"),
    403: ("This key may not use this model (scripted).", "permission_error", None),
    404: (
        "The requested model does not exist (scripted).",
        "invalid_request_error",
        "model_not_found",
    ),
    408: ("The request timed out (scripted).", "timeout", None),
    409: ("Conflicting request (scripted).", "conflict", None),
    422: ("The request could not be processed (scripted).", "invalid_request_error", None),
    429: ("Rate limit reached; slow down (scripted).", "requests", "rate_limit_exceeded"),
    500: ("The server had an internal error (scripted).", "server_error", None),
    502: ("Bad gateway (scripted).", "server_error", None),
    503: ("The engine is overloaded (scripted).", "server_error", None),
    504: ("Gateway timeout (scripted).", "server_error", None),
    529: ("Overloaded (scripted).", "overloaded_error", None),
}


def _default_error(status: int) -> tuple[str, str, str | None]:
    if status in _DEFAULT_ERRORS:
        return _DEFAULT_ERRORS[status]
    if status >= 500:
        return (f"Scripted server error {status}.", "server_error", None)
    return (f"Scripted error {status}.", "invalid_request_error", None)


def _header_pairs(
    headers: Mapping[str, str] | Iterable[tuple[str, str]] | None,
) -> tuple[tuple[str, str], ...]:
    if headers is None:
        return ()
    items = headers.items() if isinstance(headers, Mapping) else headers
    pairs = tuple((str(k), str(v)) for k, v in items)
    for name, value in pairs:
        if any(ch in name + value for ch in "\r\n") or not name:
            raise ValueError(f"invalid response header {name!r}: {value!r}")
    return pairs


@dataclass(frozen=True)
class ErrorReply(Reply):
    """An OpenAI-style error response (status + ``{"error": {...}}``)."""

    kind: ClassVar[str] = "error"

    status: int
    message: str
    code: str | None = None
    error_type: str | None = None
    headers: tuple[tuple[str, str], ...] = ()

    def body(self) -> dict[str, Any]:
        error = {"message": self.message, "type": self.error_type, "param": None, "code": self.code}
        return {"error": error}


@dataclass(frozen=True)
class DropReply(Reply):
    """Read the request, then close the connection without answering."""

    kind: ClassVar[str] = "drop"


@dataclass(frozen=True)
class SlowReply(Reply):
    """Wait (without blocking the server) before sending another reply."""

    kind: ClassVar[str] = "slow"

    seconds: float
    reply: Reply


@dataclass(frozen=True)
class StallReply(Reply):
    """A streamed answer that goes silent after ``after`` events for ``seconds`` (ending
    early when the client goes away), then goes on; a plain answer waits ``seconds`` first."""

    kind: ClassVar[str] = "stall"

    reply: Reply
    after: int
    seconds: float


@dataclass(frozen=True)
class CutReply(Reply):
    """A streamed answer whose connection is closed after ``after`` events: no
    ``finish_reason``, no ``[DONE]``; a plain answer is cut halfway through its body."""

    kind: ClassVar[str] = "cut"

    reply: Reply
    after: int


@dataclass(frozen=True)
class StreamErrorReply(Reply):
    """A streamed answer that sends ``after`` events of ``reply`` (none without one), then
    ``error`` as an ``error`` event and ends, as Anthropic's API does when it overloads
    mid-answer; a plain request gets ``error`` as an HTTP error. Anthropic server only."""

    kind: ClassVar[str] = "stream_error"

    error: ErrorReply
    reply: Reply | None = None
    after: int = 0


@dataclass(frozen=True)
class RawReply(Reply):
    """Any response at all, e.g. a malformed body or a hand-written event stream."""

    kind: ClassVar[str] = "raw"

    status: int
    body: bytes
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()

    def to_json(self) -> dict[str, Any]:
        data = super().to_json()
        try:
            data["body"] = self.body.decode("utf-8")
        except UnicodeDecodeError:
            data["body_base64"] = base64.b64encode(data.pop("body")).decode("ascii")
        return data


def _check_status(status: int) -> int:
    if not isinstance(status, int) or not 100 <= status <= 599 or status in (101, 204, 304):
        raise ValueError(f"unusable HTTP status for a scripted reply: {status!r}")
    return status


# --- factories ----------------------------------------------------------------------------


def text(
    content: str,
    *,
    usage: Any = None,
    finish_reason: str = "stop",
    thinking: str | None = None,
    redacted_thinking: str | None = None,
) -> TextReply:
    """A plain text answer; ``usage=False`` reports no usage, a dict reports fixed counts;
    ``thinking`` / ``redacted_thinking`` come before it where the server speaks thinking."""
    if not isinstance(content, str):
        raise TypeError(f"text() needs a str, not {type(content).__name__}")
    return TextReply(
        content=content,
        usage=_usage_spec(usage),
        finish_reason=finish_reason,
        thinking=_optional_text("thinking", thinking),
        redacted_thinking=_optional_text("redacted_thinking", redacted_thinking),
    )


def _optional_text(name: str, value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {type(value).__name__}")
    return value


def call(
    name: str,
    arguments: Mapping[str, Any] | str,
    *,
    id: str | None = None,
    raw_object: bool = False,
) -> ToolCall:
    """One tool call: a mapping is JSON-encoded (as real APIs do), a string is sent verbatim.

    ``raw_object=True`` sends a mapping as a JSON object instead of a string, which some
    OpenAI-compatible servers do.
    """
    if isinstance(arguments, Mapping):
        text = json.dumps(dict(arguments), ensure_ascii=False)
        return ToolCall(name=name, arguments_text=text, raw_object=raw_object, id=id)
    if isinstance(arguments, str):
        if raw_object:
            raise ValueError("raw_object=True needs the arguments as a mapping")
        return ToolCall(name=name, arguments_text=arguments, is_mapping=False, id=id)
    raise TypeError(f"tool call arguments must be a mapping or a str, not {type(arguments)}")


def tool_calls(
    *calls: ToolCall,
    content: str | None = None,
    usage: Any = None,
    finish_reason: str = "tool_calls",
    thinking: str | None = None,
    redacted_thinking: str | None = None,
) -> ToolCallsReply:
    """An assistant message with one or more tool calls (``thinking`` as in :func:`text`)."""
    if not calls:
        raise ValueError("tool_calls() needs at least one call(...)")
    for item in calls:
        if not isinstance(item, ToolCall):
            raise TypeError(f"tool_calls() takes call(...) objects, not {type(item).__name__}")
    return ToolCallsReply(
        calls=tuple(calls),
        content=content,
        usage=_usage_spec(usage),
        finish_reason=finish_reason,
        thinking=_optional_text("thinking", thinking),
        redacted_thinking=_optional_text("redacted_thinking", redacted_thinking),
    )


def error(
    status: int,
    message: str | None = None,
    *,
    code: str | None = None,
    type: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> ErrorReply:
    """An OpenAI-style error; message, type and code default to plausible values for status."""
    _check_status(status)
    if status < 400:
        raise ValueError(f"error() needs a 4xx/5xx status, got {status}")
    default_message, default_type, default_code = _default_error(status)
    return ErrorReply(
        status=status,
        message=default_message if message is None else message,
        code=default_code if code is None else code,
        error_type=default_type if type is None else type,
        headers=_header_pairs(headers),
    )


def drop() -> DropReply:
    """Close the connection after reading the request, without any response."""
    return DropReply()


def slow(seconds: float, reply: Reply | str) -> SlowReply:
    """Send ``reply`` after ``seconds``; the wait ends early if the client goes away."""
    if seconds < 0:
        raise ValueError("slow() needs a non-negative delay")
    return SlowReply(seconds=float(seconds), reply=coerce_reply(reply))


def stall(reply: Reply | str, *, after: int, seconds: float) -> StallReply:
    """Stream ``reply`` but go silent for ``seconds`` after ``after`` events (the role chunk
    is event 1, then one event per piece of text or arguments)."""
    inner = coerce_reply(reply)
    if not isinstance(inner, TextReply | ToolCallsReply):
        raise TypeError("stall() needs a text or tool_calls reply")
    if after < 0 or seconds < 0:
        raise ValueError("stall() needs a non-negative event count and delay")
    return StallReply(reply=inner, after=int(after), seconds=float(seconds))


def cut(reply: Reply | str, *, after: int) -> CutReply:
    """Stream ``reply`` but close the connection after ``after`` events."""
    inner = coerce_reply(reply)
    if not isinstance(inner, TextReply | ToolCallsReply):
        raise TypeError("cut() needs a text or tool_calls reply")
    if after < 0:
        raise ValueError("cut() needs a non-negative event count")
    return CutReply(reply=inner, after=int(after))


def stream_error(
    err: ErrorReply | int, *, reply: Reply | str | None = None, after: int = 0
) -> StreamErrorReply:
    """Stream ``after`` events of ``reply``, then ``err`` (an :func:`error` or a status) as
    an ``error`` event (Anthropic server only)."""
    failure = err if isinstance(err, ErrorReply) else error(err)
    inner = None if reply is None else coerce_reply(reply)
    if inner is not None and not isinstance(inner, TextReply | ToolCallsReply):
        raise TypeError("stream_error() needs a text or tool_calls reply")
    if after < 0:
        raise ValueError("stream_error() needs a non-negative event count")
    return StreamErrorReply(error=failure, reply=inner, after=int(after))


def raw(
    status: int,
    body: bytes | str,
    content_type: str = "application/json",
    headers: Mapping[str, str] | None = None,
) -> RawReply:
    """An arbitrary response, sent as is whether or not the request asked for a stream."""
    _check_status(status)
    data = body.encode("utf-8") if isinstance(body, str) else bytes(body)
    return RawReply(
        status=status, body=data, content_type=content_type, headers=_header_pairs(headers)
    )


def _read_calls(data: Mapping[str, Any]) -> ToolCallsReply:
    calls = data.get("calls", [])
    if not isinstance(calls, list):
        raise ValueError("'calls' of a tool_calls reply must be a list")
    return tool_calls(
        *(ToolCall.from_json(c) for c in calls),
        content=data.get("content"),
        usage=data.get("usage"),
        finish_reason=str(data.get("finish_reason", "tool_calls")),
        thinking=data.get("thinking"),
        redacted_thinking=data.get("redacted_thinking"),
    )


def _read_error(data: Any) -> ErrorReply:
    reply = Reply.from_json(data)
    if not isinstance(reply, ErrorReply):
        raise ValueError("'error' of a stream_error reply must be an error reply")
    return reply


def _read_raw(data: Mapping[str, Any]) -> RawReply:
    body = data.get("body", "")
    if "body_base64" in data:
        body = base64.b64decode(data["body_base64"])
    return raw(
        int(data.get("status", 200)),
        body,
        content_type=str(data.get("content_type", "application/json")),
        headers=data.get("headers"),
    )


#: How each kind of reply is rebuilt from its JSON (through the factories, which validate).
_READERS: dict[str, Callable[[Mapping[str, Any]], Reply]] = {
    "text": lambda d: text(
        str(d.get("content", "")),
        usage=d.get("usage"),
        finish_reason=str(d.get("finish_reason", "stop")),
        thinking=d.get("thinking"),
        redacted_thinking=d.get("redacted_thinking"),
    ),
    "tool_calls": _read_calls,
    "error": lambda d: error(
        int(d["status"]),
        d.get("message"),
        code=d.get("code"),
        type=d.get("error_type"),
        headers=d.get("headers"),
    ),
    "drop": lambda d: drop(),
    "slow": lambda d: slow(float(d["seconds"]), Reply.from_json(d["reply"])),
    "stall": lambda d: stall(
        Reply.from_json(d["reply"]), after=int(d["after"]), seconds=float(d["seconds"])
    ),
    "cut": lambda d: cut(Reply.from_json(d["reply"]), after=int(d["after"])),
    "stream_error": lambda d: stream_error(
        _read_error(d["error"]),
        reply=None if d.get("reply") is None else Reply.from_json(d["reply"]),
        after=int(d.get("after", 0)),
    ),
    "raw": _read_raw,
}


def coerce_reply(value: Any) -> Reply:
    """Accept a reply, a string (text reply) or a JSON mapping wherever a reply is expected."""
    if isinstance(value, Reply):
        return value
    if isinstance(value, str | Mapping):
        return Reply.from_json(value)
    raise TypeError(f"not a scripted reply: {value!r}")


def load_script(source: str | bytes | Any) -> list[Reply]:
    """Read a JSON list of replies from a path (str / PathLike) or an open file."""
    if hasattr(source, "read"):
        data = json.load(source)
    else:
        with open(source, encoding="utf-8") as handle:
            data = json.load(handle)
    if isinstance(data, Mapping) and "replies" in data:
        data = data["replies"]
    if not isinstance(data, list):
        raise ValueError("a script file must hold a JSON list of replies")
    return [coerce_reply(item) for item in data]
