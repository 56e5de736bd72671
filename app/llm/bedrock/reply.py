"""A Converse answer as our :class:`ModelResponse`: from the JSON of Converse, or assembled
from ConverseStream's events. Reasoning blocks are kept whole (text, signature, redacted
bytes) in ``Message.thinking_blocks`` to go back unchanged; their text is ``reasoning``."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from app.exceptions import LLMConnectionError, LLMResponseError
from app.llm.arguments import loads_safely
from app.llm.bedrock.converse import PROVIDER
from app.llm.model import ModelResponse
from app.llm.usage import Usage
from app.schema import Function, Message, ThinkingBlock, ToolCall

#: Converse's stop reasons as ours (others are kept verbatim).
STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "guardrail_intervened": "content_filter",
    "content_filtered": "content_filter",
}


def finish_reason(stop_reason: Any) -> str | None:
    if not isinstance(stop_reason, str) or not stop_reason:
        return None
    return STOP_REASONS.get(stop_reason, stop_reason)


def usage_of(data: Any) -> Usage:
    """Our usage from Converse's (its ``inputTokens`` are the uncached input only)."""
    if not isinstance(data, dict):
        return Usage()
    return Usage.from_counts(
        input=_count(data, "inputTokens"),
        output=_count(data, "outputTokens"),
        cache_read=_count(data, "cacheReadInputTokens"),
        cache_write=_count(data, "cacheWriteInputTokens"),
    )


def _count(data: dict[str, Any], key: str) -> int:
    value = data.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def response_of(blocks: list[dict[str, Any]], stop_reason: Any, usage: Any) -> ModelResponse:
    """The response of an answer's content blocks (Converse's output shape)."""
    texts: list[str] = []
    calls: list[ToolCall] = []
    thoughts: list[ThinkingBlock] = []
    for block in blocks:
        if not isinstance(block, dict):
            continue
        if isinstance(text := block.get("text"), str):
            texts.append(text)
        elif isinstance(use := block.get("toolUse"), dict):
            calls.append(_call(use))
        elif isinstance(reasoning := block.get("reasoningContent"), dict):
            thoughts.append(_thought(reasoning))
    text = "".join(texts)
    message = Message(
        role="assistant",
        content=text if text or not calls else None,
        tool_calls=calls or None,
        thinking_blocks=thoughts or None,
    )
    reasoning_text = "".join(t.text for t in thoughts)
    return ModelResponse(
        message=message,
        usage=usage_of(usage),
        finish_reason=finish_reason(stop_reason),
        reasoning=reasoning_text or None,
    )


def _call(use: dict[str, Any]) -> ToolCall:
    arguments = use.get("input")
    text = (
        arguments
        if isinstance(arguments, str)
        else json.dumps(arguments if arguments is not None else {})
    )
    return ToolCall(
        id=str(use.get("toolUseId") or ""),
        function=Function(name=str(use.get("name") or ""), arguments=text),
    )


def _thought(reasoning: dict[str, Any]) -> ThinkingBlock:
    redacted = reasoning.get("redactedContent")
    if isinstance(redacted, str):
        return ThinkingBlock(provider=PROVIDER, data=redacted)
    inner = reasoning.get("reasoningText")
    inner = inner if isinstance(inner, dict) else {}
    signature = inner.get("signature")
    return ThinkingBlock(
        provider=PROVIDER,
        text=str(inner.get("text") or ""),
        signature=signature if isinstance(signature, str) else None,
    )


def parse_converse(body: bytes, *, model: str) -> ModelResponse:
    """The response of a Converse answer's JSON."""
    try:
        data = loads_safely(body)
    except ValueError as e:
        raise LLMResponseError(
            f"Model '{model}' answered with invalid JSON ({e})", model=model
        ) from e
    output = data.get("output") if isinstance(data, dict) else None
    message = output.get("message") if isinstance(output, dict) else None
    blocks = message.get("content") if isinstance(message, dict) else None
    if not isinstance(blocks, list):
        raise LLMResponseError(
            f"Model '{model}' answered without output.message.content: not a Converse answer",
            model=model,
        )
    assert isinstance(data, dict)
    return response_of(blocks, data.get("stopReason"), data.get("usage"))


@dataclass
class _Block:
    kind: str = "text"
    pieces: list[str] = field(default_factory=list)
    tool_id: str = ""
    name: str = ""
    signature: str | None = None
    redacted: str | None = None

    def to_converse(self) -> dict[str, Any]:
        text = "".join(self.pieces)
        if self.kind == "toolUse":
            return {"toolUse": {"toolUseId": self.tool_id, "name": self.name, "input": text}}
        if self.kind == "reasoning":
            if self.redacted is not None:
                return {"reasoningContent": {"redactedContent": self.redacted}}
            return {
                "reasoningContent": {"reasoningText": {"text": text, "signature": self.signature}}
            }
        return {"text": text}


class StreamAssembler:
    """ConverseStream's events, in order, into one answer; :meth:`add` returns the text an
    event adds to the answer (for ``on_delta``)."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.blocks: dict[int, _Block] = {}
        self.stop_reason: str | None = None
        self.usage: Any = None
        self.events = 0

    @property
    def stopped(self) -> bool:
        return self.stop_reason is not None

    def add(self, event: str, payload: dict[str, Any]) -> str:
        self.events += 1
        index = payload.get("contentBlockIndex")
        if event == "contentBlockStart":
            start = payload.get("start")
            use = start.get("toolUse") if isinstance(start, dict) else None
            if isinstance(use, dict):
                block = self._block(index)
                block.kind, block.tool_id, block.name = (
                    "toolUse",
                    str(use.get("toolUseId") or ""),
                    str(use.get("name") or ""),
                )
        elif event == "contentBlockDelta":
            return self._delta(index, payload.get("delta"))
        elif event == "messageStop":
            self.stop_reason = str(payload.get("stopReason") or "") or "end_turn"
        elif event == "metadata":
            self.usage = payload.get("usage")
        return ""

    def _block(self, index: Any) -> _Block:
        key = index if isinstance(index, int) else len(self.blocks)
        return self.blocks.setdefault(key, _Block())

    def _delta(self, index: Any, delta: Any) -> str:
        if not isinstance(delta, dict):
            return ""
        block = self._block(index)
        if isinstance(text := delta.get("text"), str):
            block.pieces.append(text)
            return text if block.kind == "text" else ""
        if isinstance(use := delta.get("toolUse"), dict):
            block.kind = "toolUse"
            block.pieces.append(str(use.get("input") or ""))
        elif isinstance(reasoning := delta.get("reasoningContent"), dict):
            block.kind = "reasoning"
            if isinstance(piece := reasoning.get("text"), str):
                block.pieces.append(piece)
            if isinstance(signature := reasoning.get("signature"), str):
                block.signature = (block.signature or "") + signature
            if isinstance(redacted := reasoning.get("redactedContent"), str):
                block.redacted = (block.redacted or "") + redacted
        return ""

    def response(self, endpoint: str) -> ModelResponse:
        """The whole answer; a stream that ended before ``messageStop`` was cut short."""
        if not self.stopped:
            raise LLMConnectionError(
                f"The stream from model '{self.model}' ({endpoint}) ended before the answer was "
                f"complete (no messageStop after {self.events} event(s))",
                model=self.model,
            )
        blocks = [self.blocks[key].to_converse() for key in sorted(self.blocks)]
        return response_of(blocks, self.stop_reason, self.usage)
