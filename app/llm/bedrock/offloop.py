"""A blocking call (the AWS credential chain: files, the instance-metadata and container
endpoints, ``credential_process``; first imports) run off the event loop in a daemon thread
of its own, not the loop's executor: ``asyncio.run`` waits for the executor's threads when it
ends, so a credential source that hangs would hold Ctrl-C's exit; a daemon thread never does.

The caller awaits the returned future through ``asyncio.shield``: cancelling the caller
(Ctrl-C, an A2A cancel) returns at once, while the call runs to its own end (each AWS source
has its own timeouts) and its result is kept for the next request.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def start_in_thread(call: Callable[[], T], *, name: str) -> asyncio.Future[T]:
    """Run ``call`` in a new daemon thread; its outcome settles the returned future on the
    running loop (dropped when that loop has closed meanwhile)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    # An outcome nobody awaits any more (its caller was cancelled) is not an error to log.
    future.add_done_callback(lambda done: done.cancelled() or done.exception())

    def settle(value: T | None, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)  # type: ignore[arg-type]  # None only with an error

    def work() -> None:
        try:
            value = call()
        except BaseException as error:  # handed to the loop: raised where it is awaited
            outcome: tuple[T | None, BaseException | None] = (None, error)
        else:
            outcome = (value, None)
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is waiting
            loop.call_soon_threadsafe(settle, *outcome)

    threading.Thread(target=work, name=name, daemon=True).start()
    return future
