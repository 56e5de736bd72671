"""A scripted server that speaks Anthropic's Messages API, for driving models and agents over
real HTTP with the real ``anthropic`` SDK (docs/anthropic.md).

Built from the public API reference: ``POST /v1/messages`` (and ``/v1/messages/count_tokens``)
with ``x-api-key`` and ``anthropic-version`` checked, JSON answers and server-sent event
streams. It answers from the same script objects as :class:`~app.testing.ScriptedLLMServer`
(``text``, ``tool_calls``, ``error``, ``slow``, ``stall``, ``cut``, ``stream_error``...), and it
enforces what the real API enforces, with the real API's words where they are known:

- thinking blocks come back unchanged: a ``thinking`` block's ``signature`` is an HMAC of its
  text issued here, a ``redacted_thinking`` block's ``data`` is sealed the same way; with
  thinking on, a tool loop's last assistant turn must start with one;
- tool results answer the calls of the assistant turn right before them, all of them, first in
  their turn; roles alternate, starting with ``user`` (stricter than the API, which merges
  turns of one role: a client that relies on that is caught here);
- at most 4 blocks marked ``cache_control``;
- prompt caching: a marked block whose prefix (tools, then system, then messages, as
  canonical JSON without the marks) is at least ``min_cacheable_tokens`` long is written to the
  cache for ``cache_ttl`` seconds (``ttl: "1h"``: an hour); a later request reads the longest
  cached prefix found at one of its marks or up to 20 blocks before one, and only on a
  byte-identical prefix. Usage reports ``cache_read_input_tokens``,
  ``cache_creation_input_tokens`` and the rest as ``input_tokens``;
- a request above ``context_window`` tokens is refused as "prompt is too long".

Token counts are estimates (:func:`estimate_tokens`): one token per 3.5 characters of text
(Anthropic's rule of thumb for English), a few tokens of framing per block, 1,600 per image (a
full-size image), and 346 for the tool-use system prompt when tools are given.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import itertools
import json
import math
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from app.testing.http import Connection, HTTPRequest
from app.testing.replies import (
    CutReply,
    DropReply,
    ErrorReply,
    RawReply,
    Reply,
    StreamErrorReply,
    TextReply,
    ToolCallsReply,
    Usage,
)
from app.testing.scripted_base import ResponderFailed, ScriptedServer
from app.testing.wire import CapturedRequest, split_arguments, split_text

#: Called (on the server's thread) for a messages request when the script is empty.
Responder = Callable[[CapturedRequest], Any]

#: The key the server accepts unless given another (``api_key=None`` accepts any).
SCRIPTED_API_KEY = "sk-ant-scripted-0123456789abcdef"
#: The API versions (``anthropic-version``): the SDK 1.x sends the first, 2.x the second,
#: which refuses the sampling fields (``temperature``, ``top_p``, ``top_k``) at any value.
API_VERSIONS = ("2023-06-01", "2026-10-21")
_SAMPLING_FIELDS = ("temperature", "top_p", "top_k")

#: Tokens per character of text, and per block, image and the tool-use prompt (estimates).
CHARS_PER_TOKEN = 3.5
BLOCK_TOKENS = 3
IMAGE_TOKENS = 1600
TOOLS_PROMPT_TOKENS = 346
#: How many blocks before a breakpoint the API looks for a cached prefix.
LOOKBACK_BLOCKS = 20
MAX_BREAKPOINTS = 4
MIN_THINKING_BUDGET = 1024

_MESSAGES_PATH = re.compile(r"^/v1/messages/?$")
_COUNT_PATH = re.compile(r"^/v1/messages/count_tokens/?$")
_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")
_TOOL_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
_STREAM_HEADERS = (
    ("Content-Type", "text/event-stream; charset=utf-8"),
    ("Cache-Control", "no-cache"),
    ("Transfer-Encoding", "chunked"),
)
_BODY_FIELDS = frozenset(
    {
        "model",
        "max_tokens",
        "messages",
        "system",
        "tools",
        "tool_choice",
        "temperature",
        "top_p",
        "top_k",
        "stop_sequences",
        "stream",
        "thinking",
        "metadata",
        "service_tier",
    }
)
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
_IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
#: The answer's ``stop_reason`` for a scripted ``finish_reason`` (others are sent as given).
_STOP_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}
_DEFAULT_THINKING = "The scripted model thinks the request over."


class InvalidRequest(Exception):
    """A request the real API would refuse: the status, error type and message it sends."""

    def __init__(
        self, message: str, status: int = 400, error_type: str = "invalid_request_error"
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.error_type = error_type


@dataclass(frozen=True, slots=True)
class CacheUse:
    """How a request's input tokens split: read from the cache, written to it, neither."""

    read: int = 0
    written: int = 0
    uncached: int = 0

    @property
    def total(self) -> int:
        return self.read + self.written + self.uncached

    def to_json(self) -> dict[str, int]:
        return {
            "input_tokens": self.uncached,
            "cache_creation_input_tokens": self.written,
            "cache_read_input_tokens": self.read,
        }


# --- token estimates -------------------------------------------------------------------------


def estimate_tokens(item: Any) -> int:
    """Tokens of one block, tool definition or text, as the module docstring says."""
    if isinstance(item, str):
        return math.ceil(len(item) / CHARS_PER_TOKEN)
    if not isinstance(item, dict):
        return BLOCK_TOKENS
    kind = item.get("type")
    if kind == "image":
        return IMAGE_TOKENS
    if kind == "text":
        return BLOCK_TOKENS + estimate_tokens(str(item.get("text") or ""))
    if kind == "thinking":
        return BLOCK_TOKENS + estimate_tokens(str(item.get("thinking") or ""))
    if kind == "redacted_thinking":
        return BLOCK_TOKENS + estimate_tokens(str(item.get("data") or "")) // 2
    if kind == "tool_use":
        text = str(item.get("name") or "") + _canonical(item.get("input") or {})
        return BLOCK_TOKENS + estimate_tokens(text)
    if kind == "tool_result":
        content = item.get("content")
        if isinstance(content, list):
            return BLOCK_TOKENS + sum(estimate_tokens(part) for part in content)
        return BLOCK_TOKENS + estimate_tokens(str(content or ""))
    return BLOCK_TOKENS + estimate_tokens(_canonical(_unmarked(item)))


# --- sealing thinking ------------------------------------------------------------------------


class Seal:
    """Signatures for thinking text and sealed redacted-thinking payloads (HMAC-SHA256)."""

    def __init__(self, key: bytes) -> None:
        self._key = key

    def sign(self, text: str) -> str:
        mac = hmac.new(self._key, b"thinking\0" + text.encode("utf-8"), hashlib.sha256)
        return base64.b64encode(mac.digest()).decode("ascii")

    def seal(self, text: str) -> str:
        payload = text.encode("utf-8")
        mac = hmac.new(self._key, b"redacted\0" + payload, hashlib.sha256).digest()
        return base64.b64encode(mac + payload).decode("ascii")

    def valid_signature(self, text: Any, signature: Any) -> bool:
        return (
            isinstance(text, str)
            and isinstance(signature, str)
            and hmac.compare_digest(self.sign(text), signature)
        )

    def valid_seal(self, data: Any) -> bool:
        if not isinstance(data, str):
            return False
        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            return False
        mac, payload = raw[:32], raw[32:]
        expected = hmac.new(self._key, b"redacted\0" + payload, hashlib.sha256).digest()
        return len(raw) >= 32 and hmac.compare_digest(mac, expected)


# --- the prompt cache ------------------------------------------------------------------------


@dataclass(slots=True)
class _Prefix:
    """A request as the cache sees it: per block, the hash of the prefix ending there, the
    tokens up to there, and whether the block is marked (and with which time to live)."""

    hashes: list[str]
    ends: list[int]
    marks: list[tuple[int, float]]
    total: int


class PromptCache:
    """Cache entries by prefix hash, each with its expiry; thread-safe."""

    def __init__(
        self, *, min_tokens: int, ttl: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.min_tokens = min_tokens
        self.ttl = ttl
        self.clock = clock
        self._entries: dict[str, float] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def use(self, prefix: _Prefix) -> CacheUse:
        """Read the longest cached prefix at (or up to 20 blocks before) a mark, write the
        marked prefixes beyond it that are long enough, and say how the tokens split."""
        now = self.clock()
        with self._lock:
            read_at = -1
            for at, _ in prefix.marks:
                for pos in range(at, max(at - LOOKBACK_BLOCKS, -1), -1):
                    if pos <= read_at:
                        break
                    if self._entries.get(prefix.hashes[pos], -1.0) > now:
                        read_at = pos
                        break
            written_at = read_at
            for at, ttl in prefix.marks:
                key = prefix.hashes[at]
                if at <= read_at:
                    if self._entries.get(key, -1.0) > now:  # a hit refreshes the entry
                        self._entries[key] = max(self._entries[key], now + ttl)
                elif prefix.ends[at] >= self.min_tokens:
                    self._entries[key] = now + ttl
                    written_at = max(written_at, at)
        read = prefix.ends[read_at] if read_at >= 0 else 0
        written = prefix.ends[written_at] - read if written_at > read_at else 0
        return CacheUse(read=read, written=written, uncached=prefix.total - read - written)


def request_prefix(body: Mapping[str, Any], default_ttl: float) -> _Prefix:
    """The cacheable sequence of a (valid) request: tools, system blocks, then every message
    block; message blocks also depend on the thinking and tool choice settings (changing
    them invalidates the cached messages, as in the real API)."""
    hashes: list[str] = []
    ends: list[int] = []
    marks: list[tuple[int, float]] = []
    running = hashlib.sha256(_canonical(body.get("model")).encode())
    total = 0

    def add(item: Any, tokens: int) -> None:
        nonlocal total
        running.update(_canonical(_unmarked(item)).encode("utf-8") + b"\n")
        total += tokens
        hashes.append(running.copy().hexdigest())
        ends.append(total)
        control = item.get("cache_control") if isinstance(item, dict) else None
        if isinstance(control, dict):
            ttl = 3600.0 if control.get("ttl") == "1h" else default_ttl
            marks.append((len(hashes) - 1, ttl))

    tools = body.get("tools") or []
    for index, tool in enumerate(tools):
        add(tool, estimate_tokens(tool) + (TOOLS_PROMPT_TOKENS if index == 0 else 0))
    for block in _system_blocks(body.get("system")):
        add(block, estimate_tokens(block))
    settings = {"thinking": body.get("thinking"), "tool_choice": body.get("tool_choice")}
    running.update(_canonical(settings).encode("utf-8") + b"\n")
    for message in body.get("messages") or []:
        running.update(_canonical(message.get("role")).encode("utf-8"))
        for block in _blocks(message.get("content")):
            add(block, estimate_tokens(block))
    return _Prefix(hashes, ends, marks, total)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _unmarked(item: Any) -> Any:
    """A block without its ``cache_control`` marks (they do not change the prefix)."""
    if not isinstance(item, dict):
        return item
    clean = {k: v for k, v in item.items() if k != "cache_control"}
    if isinstance(clean.get("content"), list):
        clean["content"] = [_unmarked(part) for part in clean["content"]]
    return clean


def _blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content) if isinstance(content, list) else []


def _system_blocks(system: Any) -> list[Any]:
    if isinstance(system, str):
        return [{"type": "text", "text": system}] if system else []
    return list(system) if isinstance(system, list) else []


# --- validation ------------------------------------------------------------------------------


def validate(
    body: Any, seal: Seal, models: frozenset[str] | None, version: str = API_VERSIONS[0]
) -> None:
    """Raise :class:`InvalidRequest` for what the real API refuses (at API ``version``)."""
    if not isinstance(body, dict):
        raise InvalidRequest("request body must be a JSON object")
    refused = set(body) - _BODY_FIELDS
    if version != API_VERSIONS[0]:
        refused |= set(body) & set(_SAMPLING_FIELDS)
    for name in sorted(refused):
        raise InvalidRequest(f"{name}: Extra inputs are not permitted")
    for name in ("model", "max_tokens", "messages"):
        if name not in body:
            raise InvalidRequest(f"{name}: Field required")
    model = body["model"]
    if not isinstance(model, str) or not model:
        raise InvalidRequest("model: Input should be a valid string")
    if models is not None and model not in models:
        raise InvalidRequest(f"model: {model}", 404, "not_found_error")
    max_tokens = body["max_tokens"]
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise InvalidRequest("max_tokens: Input should be greater than or equal to 1")
    temperature = body.get("temperature")
    if temperature is not None and (
        not isinstance(temperature, int | float) or not 0 <= temperature <= 1
    ):
        raise InvalidRequest("temperature: Input should be less than or equal to 1")
    _check_tools(body.get("tools"), body.get("tool_choice"))
    _check_system(body.get("system"))
    thinking = _check_thinking(body)
    _check_messages(body["messages"], seal, thinking)
    marks = _count_marks(body)
    if marks > MAX_BREAKPOINTS:
        raise InvalidRequest(
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {marks}."
        )


def _check_tools(tools: Any, choice: Any) -> set[str]:
    names: set[str] = set()
    if tools is not None:
        if not isinstance(tools, list):
            raise InvalidRequest("tools: Input should be a valid list")
        for index, tool in enumerate(tools):
            where = f"tools.{index}"
            if not isinstance(tool, dict):
                raise InvalidRequest(f"{where}: Input should be a valid dictionary")
            name = tool.get("name")
            if not isinstance(name, str) or not _TOOL_NAME.match(name):
                raise InvalidRequest(
                    f"{where}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,128}}$'"
                )
            if name in names:
                raise InvalidRequest("tools: Tool names must be unique.")
            names.add(name)
            schema = tool.get("input_schema")
            if not isinstance(schema, dict):
                raise InvalidRequest(f"{where}.input_schema: Field required")
            if schema.get("type") != "object":
                raise InvalidRequest(f"{where}.input_schema.type: Input should be 'object'")
    if choice is not None:
        if not isinstance(choice, dict) or choice.get("type") not in (
            "auto",
            "any",
            "tool",
            "none",
        ):
            raise InvalidRequest(
                "tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'"
            )
        if choice["type"] == "tool" and choice.get("name") not in names:
            raise InvalidRequest(
                f"tool_choice.name: Tool '{choice.get('name')}' not found in the provided tools"
            )
    return names


def _check_system(system: Any) -> None:
    if system is None or isinstance(system, str):
        return
    if not isinstance(system, list):
        raise InvalidRequest("system: Input should be a valid string or list")
    for index, block in enumerate(system):
        if not isinstance(block, dict) or block.get("type") != "text":
            raise InvalidRequest(f"system.{index}.type: Input should be 'text'")
        _check_text(block, f"system.{index}")
        _check_mark(block, f"system.{index}")


def _check_thinking(body: dict[str, Any]) -> bool:
    thinking = body.get("thinking")
    if thinking is None:
        return False
    kinds = ("enabled", "adaptive", "disabled")
    if not isinstance(thinking, dict) or thinking.get("type") not in kinds:
        raise InvalidRequest("thinking.type: Input should be 'enabled', 'adaptive' or 'disabled'")
    if thinking["type"] == "disabled":
        return False
    if thinking["type"] == "enabled":
        budget = thinking.get("budget_tokens")
        if not isinstance(budget, int) or budget < MIN_THINKING_BUDGET:
            raise InvalidRequest(
                "thinking.enabled.budget_tokens: Input should be greater than or equal to "
                f"{MIN_THINKING_BUDGET}"
            )
        if body["max_tokens"] <= budget:
            raise InvalidRequest("`max_tokens` must be greater than `thinking.budget_tokens`.")
    temperature = body.get("temperature")
    if temperature is not None and temperature != 1:
        raise InvalidRequest("`temperature` may only be set to 1 when thinking is enabled.")
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") in ("any", "tool"):
        raise InvalidRequest("Thinking may not be enabled when tool_choice forces tool use.")
    return True


_USER_BLOCKS = frozenset({"text", "image", "tool_result", "document"})
_ASSISTANT_BLOCKS = frozenset({"text", "tool_use", "thinking", "redacted_thinking"})


def _check_messages(messages: Any, seal: Seal, thinking: bool) -> None:
    if not isinstance(messages, list):
        raise InvalidRequest("messages: Input should be a valid list")
    if not messages:
        raise InvalidRequest("messages: at least one message is required")
    previous_calls: list[str] = []
    seen_ids: set[str] = set()
    last = len(messages) - 1
    for i, message in enumerate(messages):
        where = f"messages.{i}"
        if not isinstance(message, dict):
            raise InvalidRequest(f"{where}: Input should be a valid dictionary")
        role = message.get("role")
        if role not in ("user", "assistant"):
            raise InvalidRequest(f"{where}.role: Input should be 'user' or 'assistant'")
        if i == 0 and role != "user":
            raise InvalidRequest('messages: first message must use the "user" role')
        if i > 0 and messages[i - 1].get("role") == role:
            raise InvalidRequest(
                'messages: roles must alternate between "user" and "assistant", but found '
                f'multiple "{role}" roles in a row'
            )
        content = message.get("content")
        blocks = _blocks(content)
        if not blocks and not (i == last and role == "assistant"):
            raise InvalidRequest(
                f"{where}: all messages must have non-empty content except for the optional "
                "final assistant message"
            )
        if isinstance(content, str):
            if not content.strip() and not (i == last and role == "assistant"):
                raise InvalidRequest(f"{where}: text content blocks must be non-empty")
            _check_answered(previous_calls, [], i)
            previous_calls = []
            continue
        if not isinstance(content, list):
            raise InvalidRequest(f"{where}.content: Input should be a valid string or list")
        allowed = _USER_BLOCKS if role == "user" else _ASSISTANT_BLOCKS
        calls: list[str] = []
        results: list[str] = []
        for j, block in enumerate(blocks):
            at = f"{where}.content.{j}"
            kind = block.get("type") if isinstance(block, dict) else None
            if kind not in allowed:
                raise InvalidRequest(
                    f"{at}.type: Input should be one of {', '.join(sorted(allowed))} "
                    f"in a {role} message"
                )
            _check_mark(block, at)
            if kind == "text":
                _check_text(block, at)
            elif kind == "image":
                _check_image(block, at)
            elif kind == "tool_use":
                call_id = _check_tool_use(block, at)
                if call_id in seen_ids:
                    raise InvalidRequest(f"{at}: `tool_use` ids must be unique: {call_id}")
                seen_ids.add(call_id)
                calls.append(call_id)
            elif kind == "tool_result":
                if j > len(results):
                    raise InvalidRequest(
                        f"{at}: tool_result blocks must come first in the user message, "
                        "before any other content"
                    )
                results.append(_check_tool_result(block, at, previous_calls))
            elif kind == "thinking":
                if "cache_control" in block:
                    raise InvalidRequest(f"{at}: thinking blocks cannot be marked for caching")
                if not seal.valid_signature(block.get("thinking"), block.get("signature")):
                    raise InvalidRequest(f"{at}: Invalid `signature` in `thinking` block")
            elif kind == "redacted_thinking" and not seal.valid_seal(block.get("data")):
                raise InvalidRequest(f"{at}: Invalid `data` in `redacted_thinking` block")
        _check_answered(previous_calls, results, i)
        previous_calls = calls
        if thinking and role == "assistant" and calls and i < last:
            follows = _blocks(messages[i + 1].get("content"))
            loop = bool(follows) and isinstance(follows[0], dict)
            loop = loop and follows[0].get("type") == "tool_result"
            is_last_assistant = all(m.get("role") != "assistant" for m in messages[i + 1 :])
            first = blocks[0].get("type")
            if loop and is_last_assistant and first not in ("thinking", "redacted_thinking"):
                raise InvalidRequest(
                    f"{where}.content.0.type: Expected `thinking` or `redacted_thinking`, but "
                    f"found `{first}`. When `thinking` is enabled, a final `assistant` message "
                    "must start with a thinking block (preceeding the lastmost set of "
                    "`tool_use` and `tool_result` blocks). We recommend you include thinking "
                    "blocks from previous turns. To avoid this requirement, disable `thinking`."
                )


def _check_answered(calls: list[str], results: list[str], index: int) -> None:
    missing = [c for c in calls if c not in results]
    if missing:
        raise InvalidRequest(
            f"messages.{index - 1}: `tool_use` ids were found without `tool_result` blocks "
            f"immediately after: {', '.join(missing)}. Each `tool_use` block must have a "
            "corresponding `tool_result` block in the next message."
        )


def _check_text(block: dict[str, Any], at: str) -> None:
    text = block.get("text")
    if not isinstance(text, str):
        raise InvalidRequest(f"{at}.text: Field required")
    if not text:
        raise InvalidRequest(f"{at}: text content blocks must be non-empty")
    if not text.strip():
        raise InvalidRequest(f"{at}: text content blocks must contain non-whitespace text")


def _check_mark(block: Any, at: str) -> None:
    control = block.get("cache_control") if isinstance(block, dict) else None
    if control is not None and (
        not isinstance(control, dict) or control.get("type") != "ephemeral"
    ):
        raise InvalidRequest(f"{at}.cache_control.type: Input should be 'ephemeral'")
    if isinstance(control, dict) and control.get("ttl") not in (None, "5m", "1h"):
        raise InvalidRequest(f"{at}.cache_control.ttl: Input should be '5m' or '1h'")


def _check_image(block: dict[str, Any], at: str) -> None:
    source = block.get("source")
    if not isinstance(source, dict):
        raise InvalidRequest(f"{at}.source: Field required")
    if source.get("type") == "url":
        url = source.get("url")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise InvalidRequest(f"{at}.source.url: Input should be a valid URL")
        return
    if source.get("type") != "base64":
        raise InvalidRequest(f"{at}.source.type: Input should be 'base64', 'url' or 'file'")
    media_type = source.get("media_type")
    if media_type not in _IMAGE_TYPES:
        raise InvalidRequest(
            f"{at}.source.base64.media_type: Input should be 'image/jpeg', 'image/png', "
            "'image/gif' or 'image/webp'"
        )
    data = source.get("data")
    try:
        raw = base64.b64decode(data if isinstance(data, str) else "", validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if not raw:
        raise InvalidRequest(f"{at}.source.base64.data: The image data is not valid base64")
    actual = _image_type(raw)
    if actual is None:
        raise InvalidRequest(f"{at}.source.base64.data: Could not process image")
    if actual != media_type:
        raise InvalidRequest(
            f"{at}.source.base64.data: The image was specified using the {media_type} media "
            f"type, but the image appears to be a {actual} image"
        )


def _image_type(raw: bytes) -> str | None:
    if raw.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if raw.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if raw.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if raw[:4] == b"RIFF" and raw[8:12] == b"WEBP":
        return "image/webp"
    return None


def _check_tool_use(block: dict[str, Any], at: str) -> str:
    call_id = block.get("id")
    if not isinstance(call_id, str) or not _TOOL_ID.match(call_id):
        raise InvalidRequest(f"{at}.id: String should match pattern '^[a-zA-Z0-9_-]+$'")
    if not isinstance(block.get("name"), str) or not block["name"]:
        raise InvalidRequest(f"{at}.name: Field required")
    if not isinstance(block.get("input"), dict):
        raise InvalidRequest(f"{at}.input: Input should be a valid dictionary")
    return call_id


def _check_tool_result(block: dict[str, Any], at: str, calls: list[str]) -> str:
    call_id = block.get("tool_use_id")
    if not isinstance(call_id, str) or call_id not in calls:
        raise InvalidRequest(
            f"{at}: unexpected `tool_use_id` found in `tool_result` blocks: {call_id}. Each "
            "`tool_result` block must have a corresponding `tool_use` block in the previous "
            "message."
        )
    if "is_error" in block and not isinstance(block["is_error"], bool):
        raise InvalidRequest(f"{at}.is_error: Input should be a valid boolean")
    content = block.get("content")
    if content is None or isinstance(content, str):
        return call_id
    if not isinstance(content, list):
        raise InvalidRequest(f"{at}.content: Input should be a valid string or list")
    for k, part in enumerate(content):
        inner = f"{at}.content.{k}"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            _check_text(part, inner)
        elif kind == "image":
            _check_image(part, inner)
        else:
            raise InvalidRequest(f"{inner}.type: Input should be 'text' or 'image'")
        _check_mark(part, inner)
    return call_id


def _count_marks(body: dict[str, Any]) -> int:
    count = sum(1 for tool in body.get("tools") or [] if "cache_control" in tool)
    count += sum(1 for block in _system_blocks(body.get("system")) if "cache_control" in block)
    for message in body["messages"]:
        for block in _blocks(message.get("content")):
            count += "cache_control" in block
            if isinstance(block.get("content"), list):
                count += sum(1 for part in block["content"] if "cache_control" in part)
    return count


# --- answers ---------------------------------------------------------------------------------


def answer_blocks(
    reply: TextReply | ToolCallsReply, thinking: bool, seal: Seal, call_ids: Iterable[str]
) -> list[dict[str, Any]]:
    """The content blocks of an answer: thinking (when the request enabled it), text, calls."""
    blocks: list[dict[str, Any]] = []
    if thinking:
        thought = reply.thinking if reply.thinking is not None else _DEFAULT_THINKING
        blocks.append({"type": "thinking", "thinking": thought, "signature": seal.sign(thought)})
        if reply.redacted_thinking is not None:
            blocks.append({"type": "redacted_thinking", "data": seal.seal(reply.redacted_thinking)})
    if reply.content:
        blocks.append({"type": "text", "text": reply.content})
    if isinstance(reply, ToolCallsReply):
        for call, call_id in zip(reply.calls, call_ids, strict=True):
            arguments = call.arguments if call.is_mapping else {"raw": call.arguments_text}
            blocks.append(
                {"type": "tool_use", "id": call_id, "name": call.name, "input": arguments}
            )
    return blocks


def output_tokens(blocks: list[dict[str, Any]]) -> int:
    return 1 + sum(estimate_tokens(block) for block in blocks)


@dataclass(frozen=True, slots=True)
class Answer:
    """One answer, sent whole (:meth:`body`) or as server-sent events (:meth:`events`)."""

    message_id: str
    model: str
    blocks: list[dict[str, Any]]
    stop_reason: str
    usage: dict[str, int]

    def body(self) -> dict[str, Any]:
        return self._message(self.blocks, self.stop_reason, self.usage)

    def _message(
        self, blocks: list[dict[str, Any]], stop_reason: str | None, usage: dict[str, int]
    ) -> dict[str, Any]:
        return {
            "id": self.message_id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": blocks,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": usage,
        }

    def events(self) -> list[bytes]:
        """Every event of the streamed answer: text and thinking in word pieces, a call's
        input in two or three JSON pieces, the signature in its own delta."""
        blocks, stop_reason, usage = self.blocks, self.stop_reason, self.usage
        start = self._message([], None, {**usage, "output_tokens": 1})
        events = [sse("message_start", {"type": "message_start", "message": start})]
        for index, block in enumerate(blocks):
            kind = block["type"]
            opening: dict[str, Any]
            deltas: list[dict[str, Any]] = []
            if kind == "text":
                opening = {"type": "text", "text": ""}
                deltas = [{"type": "text_delta", "text": p} for p in split_text(block["text"])]
            elif kind == "thinking":
                opening = {"type": "thinking", "thinking": "", "signature": ""}
                deltas = [
                    {"type": "thinking_delta", "thinking": p} for p in split_text(block["thinking"])
                ]
                deltas.append({"type": "signature_delta", "signature": block["signature"]})
            elif kind == "tool_use":
                opening = {
                    "type": "tool_use",
                    "id": block["id"],
                    "name": block["name"],
                    "input": {},
                }
                text = json.dumps(block["input"], ensure_ascii=False)
                deltas = [
                    {"type": "input_json_delta", "partial_json": p} for p in split_arguments(text)
                ]
            else:
                opening = block
            events.append(
                sse(
                    "content_block_start",
                    {"type": "content_block_start", "index": index, "content_block": opening},
                )
            )
            if index == 0:
                events.append(sse("ping", {"type": "ping"}))
            events.extend(
                sse(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": d},
                )
                for d in deltas
            )
            events.append(sse("content_block_stop", {"type": "content_block_stop", "index": index}))
        final = {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
        }
        final["usage"] = usage
        events.append(sse("message_delta", final))
        events.append(sse("message_stop", {"type": "message_stop"}))
        return events


def sse(event: str, data: Any) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def error_json(error_type: str, message: str, request_id: str) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {"type": error_type, "message": message},
        "request_id": request_id,
    }


def error_type_of(reply: ErrorReply) -> str:
    """The API's error type for a scripted error: the status decides, unless the script names
    another of the API's types (an OpenAI-style default, such as 401's
    ``invalid_request_error``, does not count)."""
    named = reply.error_type
    if named in _ERROR_TYPES.values() and named != "invalid_request_error":
        return str(named)
    if reply.status in _ERROR_TYPES:
        return _ERROR_TYPES[reply.status]
    return "api_error" if reply.status >= 500 else "invalid_request_error"


# --- the server ------------------------------------------------------------------------------


class ScriptedAnthropicServer(ScriptedServer[CapturedRequest]):
    """An Anthropic Messages API endpoint that answers from a script (see the module doc).

    Each valid messages request takes the next reply from the script; when the script is
    empty the ``responder`` (if any) builds one from the request, else the request gets
    HTTP 400. Invalid requests are refused before they take a reply. Every request is
    recorded in ``requests``, and the cache split of every answer in ``cache_uses``.
    """

    label = "scripted Anthropic server"

    def __init__(
        self,
        script: Iterable[Reply | str | Mapping[str, Any]] = (),
        responder: Responder | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        api_key: str | None = SCRIPTED_API_KEY,
        models: Iterable[str] | None = None,
        min_cacheable_tokens: int = 1024,
        cache_ttl: float = 300.0,
        context_window: int = 200_000,
        signing_key: bytes = b"scripted-anthropic-signing-key",
        clock: Callable[[], float] = time.monotonic,
        keep_requests: int | None = None,
    ) -> None:
        super().__init__(
            script,
            responder,
            host=host,
            port=port,
            thread_name=f"scripted-anthropic-server-{id(self):x}",
            keep_requests=keep_requests,
        )
        self.api_key = api_key
        self.models = frozenset(models) if models is not None else None
        self.context_window = context_window
        self.seal = Seal(signing_key)
        self.cache = PromptCache(min_tokens=min_cacheable_tokens, ttl=cache_ttl, clock=clock)
        self.cache_uses: list[CacheUse] = []
        self._ids = itertools.count(1)

    # --- public state ---------------------------------------------------------------------

    @property
    def message_requests(self) -> list[CapturedRequest]:
        """The ``POST /v1/messages`` requests (what a retry count is read from)."""
        return [r for r in self.requests if r.route == "messages"]

    # --- requests -------------------------------------------------------------------------

    async def _respond(self, conn: Connection, request: HTTPRequest) -> bool:
        path = request.target.partition("?")[0]
        route = "unknown"
        if _MESSAGES_PATH.match(path):
            route = "messages"
        elif _COUNT_PATH.match(path):
            route = "count_tokens"
        body: Any = None
        try:
            body = json.loads(request.body) if request.body else None
        except ValueError:
            body = None
        captured, _ = self._capture(
            lambda index: CapturedRequest(
                index=index,
                method=request.method,
                path=path,
                query={},
                headers=dict(request.headers),
                body=body,
                raw=request.body,
                route=route,
            )
        )
        request_id = f"req_scripted_{captured.index + 1:06d}"

        def refuse(status: int, error_type: str, message: str) -> bool:
            payload = json.dumps(error_json(error_type, message, request_id)).encode()
            conn.send_plain(status, payload, headers=[("request-id", request_id)])
            return True

        if route == "unknown":
            return refuse(404, "not_found_error", f"Not found: {request.method} {path}")
        if request.method != "POST":
            return refuse(405, "invalid_request_error", f"Method {request.method} not allowed")
        headers = {k.lower(): v for k, v in request.headers.items()}
        if self.api_key is not None:
            key = headers.get("x-api-key")  # SDK 1.x; 2.x sends a bearer token
            bearer = headers.get("authorization", "")
            if key is None and bearer.lower().startswith("bearer "):
                key = bearer[7:].strip()
            if key is None:
                return refuse(401, "authentication_error", "x-api-key header is required")
            if not hmac.compare_digest(key.encode(), self.api_key.encode()):
                return refuse(401, "authentication_error", "invalid x-api-key")
        version = headers.get("anthropic-version")
        if version is None:
            return refuse(400, "invalid_request_error", "anthropic-version: header is required")
        if version not in API_VERSIONS:
            message = f"anthropic-version: {version!r} is not a valid version"
            return refuse(400, "invalid_request_error", message)
        if body is None and request.body:
            return refuse(400, "invalid_request_error", "The request body is not valid JSON")
        try:
            if route == "count_tokens":
                counted = dict(body or {}, max_tokens=1)
                validate(counted, self.seal, self.models, version)
                tokens = request_prefix(counted, self.cache.ttl).total
                conn.send_plain(200, json.dumps({"input_tokens": tokens}).encode())
                return True
            validate(body, self.seal, self.models, version)
            prefix = request_prefix(body, self.cache.ttl)
            self._check_window(prefix.total, body["max_tokens"])
        except InvalidRequest as e:
            return refuse(e.status, e.error_type, e.message)
        with self._watching(conn, captured.index):
            return await self._answer(conn, captured, body, prefix, request_id)

    def _check_window(self, tokens: int, max_tokens: int) -> None:
        window = self.context_window
        if tokens > window:
            raise InvalidRequest(f"prompt is too long: {tokens} tokens > {window} maximum")
        if tokens + max_tokens > window:
            raise InvalidRequest(
                f"input length and `max_tokens` exceed context limit: {tokens} + {max_tokens} "
                f"> {window}, decrease input length or `max_tokens` and try again"
            )

    async def _answer(
        self,
        conn: Connection,
        captured: CapturedRequest,
        body: dict[str, Any],
        prefix: _Prefix,
        request_id: str,
    ) -> bool:
        try:
            scripted = await self._reply_for(captured, self._next_reply())
        except ResponderFailed as exc:
            message = f"scripted server: the responder raised {exc}"
            return self._send_error(conn, 500, "api_error", message, request_id)
        if scripted is None:
            message = (
                f"scripted server: script exhausted after {self._served} requests "
                "(push more replies or give a responder)"
            )
            return self._send_error(conn, 400, "invalid_request_error", message, request_id)
        stream = body.get("stream") is True
        reply, interruption = await self._unwrap(conn, captured.index, scripted, stream)
        if reply is None or isinstance(reply, DropReply):
            return False
        if isinstance(reply, ErrorReply):
            return self._send_error(
                conn,
                reply.status,
                error_type_of(reply),
                reply.message,
                request_id,
                reply.headers,
                in_stream=stream and isinstance(interruption, StreamErrorReply),
            )
        if isinstance(reply, RawReply):
            return self._send_raw(conn, reply)
        if not isinstance(reply, TextReply | ToolCallsReply):
            raise TypeError(f"the Anthropic server cannot send {reply!r}")
        thinking = isinstance(body.get("thinking"), dict) and body["thinking"]["type"] != "disabled"
        call_ids = [
            call.id or f"toolu_scripted_{next(self._ids):04d}"
            for call in (reply.calls if isinstance(reply, ToolCallsReply) else ())
        ]
        blocks = answer_blocks(reply, thinking, self.seal, call_ids)
        use = self.cache.use(prefix)
        with self._lock:
            self.cache_uses.append(use)
        usage = {**use.to_json(), "output_tokens": output_tokens(blocks)}
        if isinstance(reply.usage, Usage):
            usage = {
                "input_tokens": reply.usage.prompt_tokens,
                "output_tokens": reply.usage.completion_tokens,
            }
        elif reply.usage is False:
            usage = {"input_tokens": 0, "output_tokens": 0}
        stop_reason = _STOP_REASONS.get(reply.finish_reason, reply.finish_reason)
        message_id = f"msg_scripted_{captured.index + 1:06d}"
        answer = Answer(message_id, str(body["model"]), blocks, stop_reason, usage)
        head = [("request-id", request_id)]
        if not stream:
            data = json.dumps(answer.body()).encode()
            if isinstance(interruption, CutReply):
                return await self._send_cut(conn, data, head)
            conn.send_plain(200, data, headers=head)
            return True

        def error_event(failure: ErrorReply) -> bytes:
            return sse("error", error_json(error_type_of(failure), failure.message, request_id))

        head = [*_STREAM_HEADERS, *head]
        return await self._stream(
            conn, captured.index, head, answer.events(), interruption, error_event
        )

    def _send_error(
        self,
        conn: Connection,
        status: int,
        error_type: str,
        message: str,
        request_id: str,
        headers: Iterable[tuple[str, str]] = (),
        *,
        in_stream: bool = False,
    ) -> bool:
        payload = error_json(error_type, message, request_id)
        head = [("request-id", request_id), *headers]
        if in_stream:  # the answer began with 200: the error comes as an event
            conn.send_head(200, [*_STREAM_HEADERS, *head], sse("error", payload))
            conn.end()
            return True
        conn.send_plain(status, json.dumps(payload).encode(), headers=head)
        return True
