"""Streamed text on its way to a watcher (``ModelParams.on_delta``): handed over whether the
callback is sync or async, and never repeated when a retried attempt starts over."""

from __future__ import annotations

import inspect
from typing import Any

from app.llm.model import DeltaCallback


async def deliver(on_delta: DeltaCallback | None, text: str | None) -> None:
    """Hand ``text`` to ``on_delta`` (sync or async) when both are there."""
    if on_delta is None or not text:
        return
    outcome = on_delta(text)
    if inspect.isawaitable(outcome):
        await outcome


class DeltaRelay:
    """Passes streamed text to a watcher across retries without repeating it: a retried
    stream starts from the first word again, so only what goes beyond is passed on."""

    __slots__ = ("_seen", "_sent", "target")

    def __init__(self, target: Any) -> None:
        self.target = target
        self._sent = 0
        self._seen = 0

    def attempt(self) -> None:
        """A new attempt starts: its text counts from zero again."""
        self._seen = 0

    @property
    def delivered(self) -> bool:
        return self._sent > 0

    def new_text(self, piece: str) -> str:
        """The part of ``piece`` the watcher has not had yet."""
        before = self._seen
        self._seen += len(piece)
        if self._seen <= self._sent:
            return ""
        fresh = piece[max(0, self._sent - before) :]
        self._sent = self._seen
        return fresh

    async def pass_on(self, piece: str) -> None:
        """Deliver what ``piece`` adds to the watcher."""
        await deliver(self.target, self.new_text(piece))
