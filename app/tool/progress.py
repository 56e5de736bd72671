"""The tool call running in this task (set by the agent around each call), so a long tool
can report progress: the agent turns it into a ``ToolProgress`` event.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass

#: Receives (progress, total, message).
ProgressReporter = Callable[[float, float | None, str | None], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class ToolCallContext:
    """Which call is running (``call_id`` from the model, tool ``name``) and where its
    progress goes."""

    call_id: str
    name: str
    report: ProgressReporter


_CURRENT: ContextVar[ToolCallContext | None] = ContextVar("tool_call_context", default=None)


def current_tool_call() -> ToolCallContext | None:
    """The call running in this task, if an agent runs it."""
    return _CURRENT.get()


class tool_call_context:  # a context manager used like a function, hence the name
    """Make ``context`` the current call for the block (restored afterwards). A class, not a
    generator: it runs around every tool call."""

    __slots__ = ("_context", "_token")

    def __init__(self, context: ToolCallContext) -> None:
        self._context = context

    def __enter__(self) -> ToolCallContext:
        self._token = _CURRENT.set(self._context)
        return self._context

    def __exit__(self, *exc: object) -> None:
        _CURRENT.reset(self._token)
