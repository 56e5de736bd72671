"""The tool call running in this task (set by the agent around each call), so a long tool
can report progress (the agent turns it into a ``ToolProgress`` event) and, when cancelled,
leave what it had produced.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field

#: Receives (progress, total, message).
ProgressReporter = Callable[[float, float | None, str | None], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class ToolCallContext:
    """Which call is running (``call_id`` from the model, tool ``name``) and where its
    progress goes."""

    call_id: str
    name: str
    report: ProgressReporter
    #: What the call had produced when it was cancelled (see :func:`keep_partial_output`).
    partial_output: list[str] = field(default_factory=list)


_CURRENT: ContextVar[ToolCallContext | None] = ContextVar("tool_call_context", default=None)


def current_tool_call() -> ToolCallContext | None:
    """The call running in this task, if an agent runs it."""
    return _CURRENT.get()


def keep_partial_output(text: str) -> None:
    """A tool being cancelled leaves what it had produced (a command's output so far): the
    agent reports it with the cancelled call, so Stop does not lose what was printed."""
    context = _CURRENT.get()
    if context is not None and text:
        context.partial_output.append(text)


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
