"""Per-task hooks around every LLM request, carried by context variables.

A batch runs many agents (and flows, and tools that call models) in one process. Rather than
threading a limiter and a usage counter through every constructor, the batch sets these for the
task's asyncio context; every ``LLM`` instance the task touches (agents' own, a flow's planner,
the browser tool's extractor) then honours them, and sibling tasks never see each other's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.llm.usage import Usage

__all__ = [
    "RequestGate",
    "RequestTimer",
    "llm_scope",
    "request_gate",
    "request_timer",
    "usage_sink",
]

#: Awaited before every HTTP attempt (retries included): a rate limiter, for example.
RequestGate = Callable[[], Awaitable[None]]

request_gate: ContextVar[RequestGate | None] = ContextVar("openmanus_request_gate", default=None)
#: Every usage an LLM records in this context is also added here.
usage_sink: ContextVar[Usage | None] = ContextVar("openmanus_usage_sink", default=None)

#: Told the wall-clock seconds of every HTTP attempt (retries included), from sending the
#: request to having the whole answer (a streamed one read to its end): a profiler's way to
#: split a run into model time and framework time (``bench/real_model.py``). Called on the
#: event loop after each attempt, failed ones too; it must be cheap and must not raise.
RequestTimer = Callable[[float], None]

request_timer: ContextVar[RequestTimer | None] = ContextVar("openmanus_request_timer", default=None)


@contextmanager
def llm_scope(*, gate: RequestGate | None = None, usage: Usage | None = None) -> Iterator[None]:
    """Set the gate and the usage sink for the code inside the block (and tasks it starts)."""
    gate_token = request_gate.set(gate)
    usage_token = usage_sink.set(usage)
    try:
        yield
    finally:
        usage_sink.reset(usage_token)
        request_gate.reset(gate_token)
