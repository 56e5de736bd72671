"""Per-task hooks around every LLM request, carried by context variables: every ``LLM`` a
batch task touches honours its gate and usage sink, and sibling tasks never see each other's.
The gate and the timer act through the :class:`RateGate` and :class:`Timed` transport layers.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from app.llm.openai.transport import ChatRequest, Wrapper

if TYPE_CHECKING:
    from app.llm.usage import Usage

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


class RateGate(Wrapper):
    """Awaits the context's ``request_gate`` before each attempt (its wait is not model time:
    this layer sits above :class:`Timed`)."""

    async def send(self, request: ChatRequest) -> dict[str, Any]:
        gate = request_gate.get()
        if gate is not None:
            await gate()
        return await self.inner.send(request)


class Timed(Wrapper):
    """Tells the context's ``request_timer`` the seconds of each attempt."""

    async def send(self, request: ChatRequest) -> dict[str, Any]:
        timer = request_timer.get()
        if timer is None:
            return await self.inner.send(request)
        start = time.perf_counter()
        try:
            return await self.inner.send(request)
        finally:
            timer(time.perf_counter() - start)
