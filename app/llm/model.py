"""The model layer's contract: what one request to a chat model gives back.

Everything above ``app.llm`` (agents, flows, compaction) talks to a model through
``LLM.request(...) -> ModelResponse``; the usage of a call travels with its response instead of
through shared mutable state on the ``LLM``, so concurrent callers never see each other's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.llm.usage import Usage
from app.schema import Message

__all__ = ["FINISH_REASONS", "ModelResponse"]

#: ``finish_reason`` values the OpenAI API defines; servers may send others (kept verbatim).
FINISH_REASONS = ("stop", "length", "tool_calls", "content_filter", "function_call")


@dataclass(slots=True)
class ModelResponse:
    """One model turn: the assistant message, what it cost, and why it ended.

    ``finish_reason`` is None when the server did not say. ``reasoning`` holds the model's
    reasoning text (``reasoning_content`` or ``<think>`` blocks), never part of ``message``.
    """

    message: Message
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None
    reasoning: str | None = None

    @property
    def truncated(self) -> bool:
        """The answer was cut at the token limit (it is not a complete answer)."""
        return self.finish_reason == "length"
