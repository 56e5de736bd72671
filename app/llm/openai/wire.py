"""Messages in wire format, built, JSON-encoded and token-counted once per ``Message`` (an agent
re-sends its whole history at every step). An entry stays valid while the message's fields are
the objects it was built from and nothing was edited in place since
(``app.schema.nested_edit_count``). Wire dicts handed out are shared: treat them as read-only.
"""

from __future__ import annotations

import json
from datetime import date, datetime
from typing import Any

from pydantic_core import PydanticSerializationError, to_json

from app.schema import ROLE_VALUES, Message, nested_edit_count
from app.tokens import REPLY_PRIMING


class WireEntry:
    """One message's wire form: the dict sent (without its images), the images, the JSON text
    and the token count (per counter signature), each computed at most once."""

    __slots__ = (
        "_json",
        "base64_image",
        "calls",
        "content",
        "images",
        "name",
        "role",
        "snapshot",
        "stamp",
        "tokens",
        "tool_call_id",
        "tool_calls_len",
        "wire",
    )

    def __init__(self, message: Message) -> None:
        role = message.role
        if role not in ROLE_VALUES:
            raise ValueError(f"Invalid message role: {role!r}")
        self.role = role
        self.content = message.content
        self.calls = message.tool_calls
        self.tool_calls_len = len(self.calls) if self.calls is not None else -1
        self.name = message.name
        self.tool_call_id = message.tool_call_id
        self.base64_image = message.base64_image
        self.images = message.images
        self.stamp = nested_edit_count()
        wire: dict[str, Any] = {"role": role}
        if self.content is not None:
            wire["content"] = self.content
        if self.calls:  # an empty list is rejected by the API: leave the key out
            wire["tool_calls"] = [
                {
                    "id": call.id,
                    "type": call.type,
                    "function": {"name": call.function.name, "arguments": call.function.arguments},
                }
                for call in self.calls
            ]
        if self.name is not None:
            wire["name"] = self.name
        if self.tool_call_id is not None:
            wire["tool_call_id"] = self.tool_call_id
        self.wire = wire
        self.tokens: tuple[Any, int] | None = None
        self._json: bytes | None = None
        # Where a request over the conversation this message starts resumes (formatting).
        self.snapshot: Any = None

    def matches(self, message: Message) -> bool:
        calls = message.tool_calls
        return (
            self.content is message.content
            and self.calls is calls
            and self.role is message.role
            and self.tool_call_id is message.tool_call_id
            and self.base64_image is message.base64_image
            and self.images is message.images
            and self.name is message.name
            and self.stamp == nested_edit_count()
            and self.tool_calls_len == (len(calls) if calls is not None else -1)
        )

    @property
    def json(self) -> bytes:
        if self._json is None:
            try:
                # Only text: pydantic-core writes the same bytes as ``dumps``, several times
                # faster; it refuses lone surrogates, which ``dumps`` escapes.
                self._json = to_json(self.wire)
            except PydanticSerializationError:
                self._json = dumps(self.wire)
        return self._json


#: The slot ``Message`` keeps for this module's cache, used through its descriptor: a miss
#: through the model's ``__getattr__`` costs a second exception, and a write through its
#: ``__setattr__`` counts as an edit of the message.
_SLOT: Any = vars(Message)["_wire"]


def wire_entry(message: Message) -> WireEntry:
    """The message's cached wire entry, rebuilt when the message changed."""
    try:
        entry: WireEntry | None = _SLOT.__get__(message)
    except AttributeError:  # never encoded
        entry = None
    if entry is not None and entry.matches(message):
        return entry
    entry = WireEntry(message)
    _SLOT.__set__(message, entry)
    return entry


def _default(value: Any) -> Any:
    """What the openai SDK's encoder also accepts: pydantic models and dates."""
    if isinstance(value, datetime | date):
        return value.isoformat()
    model_dump = getattr(value, "model_dump", None)
    if callable(model_dump):
        return model_dump(mode="json", exclude_unset=True, by_alias=True)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_COMPACT: dict[str, Any] = {"separators": (",", ":"), "allow_nan": False, "default": _default}
_UTF8 = json.JSONEncoder(ensure_ascii=False, **_COMPACT)
_ASCII = json.JSONEncoder(ensure_ascii=True, **_COMPACT)


def dumps(value: Any) -> bytes:
    """Compact JSON as UTF-8 bytes (the SDK's format); text with lone surrogates is sent with
    ``\\u`` escapes instead of failing the request."""
    text = _UTF8.encode(value)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _ASCII.encode(value).encode("ascii")


def encode_body(
    fragments: list[bytes], fields: dict[str, Any] | bytes, tools_json: bytes | None = None
) -> bytes:
    """A chat-completions body: ``messages`` from ready JSON fragments, ``tools`` from ready
    JSON, plus ``fields`` (a dict, or its JSON object already encoded); one copy of the
    (possibly large) message text."""
    parts = [b'{"messages":[', b",".join(fragments), b"]"]
    if tools_json is not None:
        parts += [b',"tools":', tools_json]
    encoded = fields if isinstance(fields, bytes) else dumps(fields)
    if encoded != b"{}":
        parts += [b",", encoded[1:]]
    else:
        parts.append(b"}")
    return b"".join(parts)


def count_tokens(
    counter: Any, messages: list[dict[str, Any]], entries: list[WireEntry | None]
) -> int:
    """Tokens of a request's messages; each cached message is tokenized once per encoding."""
    signature = counter.signature
    total = REPLY_PRIMING
    for wire, entry in zip(messages, entries, strict=True):
        if entry is None:
            total += counter.count_message(wire)
            continue
        cached = entry.tokens
        if cached is not None and cached[0] == signature:
            total += cached[1]
            continue
        count = counter.count_message(wire)
        entry.tokens = (signature, count)
        total += count
    return total
