"""Per-task hooks around every LLM request, carried by context variables: every ``LLM`` a
batch task touches honours its gate and usage sink, and sibling tasks never see each other's.
The gate and the timer act through the :class:`RateGate` and :class:`Timed` model wrappers
(``app.llm.stack`` puts them around every model, under the retries: they see each attempt).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING

from app.llm.model import Model, ModelParams, ModelResponse
from app.schema import Message

if TYPE_CHECKING:
    from app.llm.usage import Usage

#: Awaited before every attempt (retries included): a rate limiter, for example.
RequestGate = Callable[[], Awaitable[None]]

request_gate: ContextVar[RequestGate | None] = ContextVar("openmanus_request_gate", default=None)
#: Every usage an LLM records in this context is also added here.
usage_sink: ContextVar[Usage | None] = ContextVar("openmanus_usage_sink", default=None)

#: Told the wall-clock seconds of every attempt (retries included), from handing the request
#: to the model to having its whole answer (a streamed one read to its end): a profiler's way
#: to split a run into model time and framework time (``bench/real_model.py``). Called on the
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


class RateGate:
    """Wraps ``inner``: each attempt awaits the context's ``request_gate``, then one of
    ``slots`` places in flight (one ``LLM``'s ``max_concurrent_requests``; more wait their
    turn). Neither wait is model time: this wrapper sits above :class:`Timed`."""

    def __init__(self, inner: Model, slots: int) -> None:
        self.inner = inner
        self.name = inner.name
        self.slots = slots
        self._slots: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def request(self, messages: Sequence[Message], params: ModelParams) -> ModelResponse:
        gate = request_gate.get()
        if gate is not None:
            await gate()
        # The in-flight bound, one per event loop (a semaphore is bound to its loop).
        slots, loop = self._slots, asyncio.get_running_loop()
        if slots is None or self._loop is not loop:
            slots = self._slots = asyncio.Semaphore(self.slots)
            self._loop = loop
        async with slots:
            return await self.inner.request(messages, params)


class Timed:
    """Wraps ``inner``: tells the context's ``request_timer`` the seconds of each attempt."""

    def __init__(self, inner: Model) -> None:
        self.inner = inner
        self.name = inner.name

    async def request(self, messages: Sequence[Message], params: ModelParams) -> ModelResponse:
        timer = request_timer.get()
        if timer is None:
            return await self.inner.request(messages, params)
        start = time.perf_counter()
        try:
            return await self.inner.request(messages, params)
        finally:
            timer(time.perf_counter() - start)
