"""A Messages API answer as our ``ModelResponse``: from the whole message, or assembled from
its server-sent events. Works on the wire JSON (the SDK's objects as ``to_dict()``), so one
path serves both and any SDK version.

Thinking stays out of the answer: its text is ``reasoning``, and its blocks (signed, or
redacted) are kept on the message as ``thinking_blocks`` to be sent back unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from app.exceptions import LLMResponseError
from app.llm.anthropic.messages import PROVIDER
from app.llm.model import ModelResponse
from app.llm.usage import Usage
from app.schema import Function, Message, ThinkingBlock, ToolCall
from app.text import clean_text

#: The API's ``stop_reason`` as our ``finish_reason``; others are kept as they come
#: (``pause_turn``: a server tool paused the turn).
FINISH_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}


def finish_reason(stop_reason: str | None) -> str | None:
    return None if stop_reason is None else FINISH_REASONS.get(stop_reason, stop_reason)


def usage_of(data: Mapping[str, Any] | None) -> Usage:
    """Our usage from the API's (its ``input_tokens`` are the uncached input only)."""
    if not data:
        return Usage()
    return Usage.from_counts(
        input=_count(data, "input_tokens"),
        output=_count(data, "output_tokens"),
        cache_read=_count(data, "cache_read_input_tokens"),
        cache_write=_count(data, "cache_creation_input_tokens"),
    )


def response_from_message(data: Mapping[str, Any], model: str) -> ModelResponse:
    """The response for a whole (not streamed) message body."""
    content = data.get("content")
    if not isinstance(content, list):
        raise LLMResponseError(
            f"Unusable response from model '{model}': no content list in {_excerpt(data)}",
            model=model,
        )
    blocks = [block for block in content if isinstance(block, dict)]
    return build_response(blocks, data.get("stop_reason"), data.get("usage"))


def build_response(
    blocks: list[dict[str, Any]], stop_reason: Any, usage: Mapping[str, Any] | None
) -> ModelResponse:
    texts: list[str] = []
    thoughts: list[str] = []
    kept: list[ThinkingBlock] = []
    calls: list[ToolCall] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            texts.append(str(block.get("text") or ""))
        elif kind == "tool_use":
            arguments = block.get("arguments_text")
            if not isinstance(arguments, str):
                arguments = json.dumps(block.get("input") or {}, ensure_ascii=False)
            calls.append(
                ToolCall(
                    id=str(block.get("id") or ""),
                    function=Function(name=str(block.get("name") or ""), arguments=arguments),
                )
            )
        elif kind == "thinking":
            text = str(block.get("thinking") or "")
            thoughts.append(text)
            signature = block.get("signature")
            kept.append(
                ThinkingBlock(
                    provider=PROVIDER,
                    text=text,
                    signature=signature if isinstance(signature, str) else None,
                )
            )
        elif kind == "redacted_thinking":
            kept.append(ThinkingBlock(provider=PROVIDER, data=str(block.get("data") or "")))
    text = "".join(texts)
    message = Message(
        role="assistant",
        content=clean_text(text) if texts else None,
        tool_calls=calls or None,
        thinking_blocks=kept or None,
    )
    reasoning = "\n\n".join(t.strip() for t in thoughts if t.strip())
    return ModelResponse(
        message=message,
        usage=usage_of(usage),
        finish_reason=finish_reason(stop_reason if isinstance(stop_reason, str) else None),
        reasoning=clean_text(reasoning) if reasoning else None,
    )


class StreamAssembly:
    """Builds the message from its events, in order (``feed`` returns new answer text)."""

    __slots__ = ("blocks", "done", "events", "parts", "stop_reason", "usage")

    def __init__(self) -> None:
        self.blocks: dict[int, dict[str, Any]] = {}
        self.parts: dict[int, list[str]] = {}
        self.usage: dict[str, Any] = {}
        self.stop_reason: str | None = None
        self.done = False
        self.events = 0

    def feed(self, event: Mapping[str, Any]) -> str | None:
        self.events += 1
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message")
            if isinstance(message, dict):
                self._usage(message.get("usage"))
        elif kind == "content_block_start":
            block = event.get("content_block")
            if isinstance(block, dict):
                self.blocks[_index(event)] = dict(block)
        elif kind == "content_block_delta":
            return self._delta(_index(event), event.get("delta"))
        elif kind == "content_block_stop":
            index = _index(event)
            block = self.blocks.get(index)
            if block is not None and block.get("type") == "tool_use" and index in self.parts:
                block["arguments_text"] = "".join(self.parts.pop(index)) or "{}"
        elif kind == "message_delta":
            delta = event.get("delta")
            if isinstance(delta, dict) and delta.get("stop_reason") is not None:
                self.stop_reason = str(delta["stop_reason"])
            self._usage(event.get("usage"))
        elif kind == "message_stop":
            self.done = True
        return None

    def _delta(self, index: int, delta: Any) -> str | None:
        block = self.blocks.get(index)
        if block is None or not isinstance(delta, dict):
            return None
        kind = delta.get("type")
        if kind == "text_delta":
            piece = str(delta.get("text") or "")
            block["text"] = str(block.get("text") or "") + piece
            return piece
        if kind == "input_json_delta":
            self.parts.setdefault(index, []).append(str(delta.get("partial_json") or ""))
        elif kind == "thinking_delta":
            block["thinking"] = str(block.get("thinking") or "") + str(delta.get("thinking") or "")
        elif kind == "signature_delta":
            block["signature"] = str(block.get("signature") or "") + str(
                delta.get("signature") or ""
            )
        return None

    def _usage(self, data: Any) -> None:
        if isinstance(data, dict):  # the counts in message_delta are running totals
            self.usage.update({k: v for k, v in data.items() if v is not None})

    def response(self, model: str) -> ModelResponse:
        if not self.done:
            raise LLMResponseError(
                f"The stream from model '{model}' ended before its message_stop event "
                f"(after {self.events} event(s))",
                model=model,
            )
        for index, parts in self.parts.items():  # a tool call whose block never closed
            self.blocks[index]["arguments_text"] = "".join(parts) or "{}"
        blocks = [self.blocks[index] for index in sorted(self.blocks)]
        return build_response(blocks, self.stop_reason, self.usage)


def _index(event: Mapping[str, Any]) -> int:
    index = event.get("index")
    return index if isinstance(index, int) else -1


def _count(data: Mapping[str, Any], key: str) -> int:
    value = data.get(key)
    return value if isinstance(value, int) and value > 0 else 0


def _excerpt(data: Any) -> str:
    text = json.dumps(data, default=str)
    return text if len(text) <= 200 else text[:197] + "..."
