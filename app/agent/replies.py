"""The bookkeeping of a run's model replies, for ``ToolCallAgent``: what one reply asks of the
step (``Turn``), and across replies the empty ones in a row, the parts of an answer cut at
``max_tokens``, the latest text and the final answer (``ReplyBook``)."""

from __future__ import annotations

from dataclasses import dataclass

from app.llm.model import ModelResponse
from app.schema import ToolCall


@dataclass(slots=True)  # not frozen: a frozen dataclass's __init__ costs 5x more, per step
class Turn:
    """One reply, read: its text, its tool calls (none when tools are disabled), and what it
    is: ``empty`` (no text, no call: ``count`` in a row), ``cut`` (a text answer cut at
    ``max_tokens``: ``count`` parts in a row) or neither (something to act on)."""

    content: str
    calls: list[ToolCall]
    empty: bool = False
    cut: bool = False
    count: int = 0
    ignored_calls: bool = False  # the model called tools while they were disabled

    @property
    def shown(self) -> list[ToolCall]:
        """The calls that name a tool (a nameless one, a small model's garbled text, is
        answered as an unknown tool but not shown as a call)."""
        return [call for call in self.calls if call.function.name.strip()]


class ReplyBook:
    """A run's account of the model's replies (reset by ``begin_run``)."""

    __slots__ = ("empty_replies", "final_answer", "last_text", "parts", "reply_cut")

    def __init__(self) -> None:
        self.begin_run()

    def begin_run(self) -> None:
        self.empty_replies = 0
        self.parts: list[str] = []  # the parts of an answer cut at max_tokens
        self.reply_cut = False  # the latest reply ended at max_tokens
        self.last_text: str | None = None  # the model's latest words (cut parts joined)
        self.final_answer: str | None = None  # the answer that ended the run

    def read(self, reply: ModelResponse, *, tools_enabled: bool) -> Turn:
        """Take ``reply`` into the account and say what it asks of the step."""
        message = reply.message
        calls = list(message.tool_calls or [])
        content = message.content or ""
        ignored = bool(calls) and not tools_enabled
        if ignored:
            calls = []
        if not content.strip() and not calls:
            self.empty_replies += 1
            return Turn(content, calls, empty=True, count=self.empty_replies, ignored_calls=ignored)
        self.empty_replies = 0
        self.reply_cut = reply.truncated
        if reply.truncated and not calls:  # not the answer: a part of it
            self.parts.append(content)
            self.last_text = "".join(self.parts)
            return Turn(content, calls, cut=True, count=len(self.parts), ignored_calls=ignored)
        answer = content if calls else "".join(self.parts) + content
        self.parts = []
        if content.strip():
            self.last_text = answer
        return Turn(content, calls, ignored_calls=ignored)

    def answer(self) -> str | None:
        """The text answer that ended the run; else the model's last words in this run."""
        return self.final_answer if self.final_answer is not None else self.last_text
