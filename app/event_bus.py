"""The bus that delivers an agent's or flow's events to its listeners, and the stream view.

Kept apart from the event types (:mod:`app.events`) so that owning a bus costs nothing at
import: emitters check ``bus.active`` and only then import and build an event.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from app.logger import logger

if TYPE_CHECKING:
    from app.events import Event

__all__ = ["EventBus", "EventStream", "Listener", "stream_events"]


#: A listener may be a plain function or a coroutine function.
Listener = Callable[["Event"], Awaitable[None] | None]


class EventBus:
    """Delivers events to listeners in subscription order; a failing listener is logged and
    skipped, never fatal to the run."""

    __slots__ = ("_listeners",)

    def __init__(self) -> None:
        self._listeners: list[Listener] = []

    @property
    def active(self) -> bool:
        """Whether anyone listens (emitters skip building events otherwise)."""
        return bool(self._listeners)

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Add ``listener``; returns a function that removes it again."""
        self._listeners.append(listener)
        return lambda: self.unsubscribe(listener)

    def unsubscribe(self, listener: Listener) -> None:
        with contextlib.suppress(ValueError):
            self._listeners.remove(listener)

    async def emit(self, event: Event) -> None:
        for listener in tuple(self._listeners):
            try:
                outcome = listener(event)
                if inspect.isawaitable(outcome):
                    await outcome
            except Exception as e:
                logger.warning(f"Event listener {listener!r} failed on {event.kind}: {e}")


class EventStream:
    """The events of a piece of work as an async iterator (see :func:`stream_events`).

    ``async for event in stream`` reads them; ``async with stream: ...`` (or ``aclose()``)
    makes leaving the loop early stop the work at once rather than when it is collected.
    """

    def __init__(self, bus: EventBus, work: Awaitable[Any]) -> None:
        self._bus = bus
        self._work: Awaitable[Any] | None = work
        self._queue: asyncio.Queue[Event | None] = asyncio.Queue()
        self._task: asyncio.Future[Any] | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self._done = False

    def _start(self) -> None:
        if self._task is None and self._work is not None:
            self._unsubscribe = self._bus.subscribe(self._queue.put_nowait)
            self._task = asyncio.ensure_future(self._work)
            self._task.add_done_callback(lambda _: self._queue.put_nowait(None))
            self._work = None

    def __aiter__(self) -> EventStream:
        return self

    async def __anext__(self) -> Event:
        if self._done:
            raise StopAsyncIteration
        self._start()
        event = await self._queue.get()
        if event is None:
            self._done = True
            self._detach()
            assert self._task is not None
            await self._task  # raises what the work raised (misuse, for example)
            raise StopAsyncIteration
        return event

    async def __aenter__(self) -> EventStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop the work if it is still going (its cleanup runs) and stop listening."""
        self._done = True
        self._detach()
        if self._work is not None and inspect.iscoroutine(self._work):
            self._work.close()  # never started
            self._work = None
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def _detach(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None


def stream_events(bus: EventBus, work: Awaitable[Any]) -> EventStream:
    """Run ``work`` once iteration starts and yield every event ``bus`` delivers meanwhile."""
    return EventStream(bus, work)
