"""What the runner needs from a backend (the backends are :mod:`app.batch.local` and
:mod:`app.batch.ray_backend`; the runner picks one by name)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from app.batch.execute import ExecutionSettings
from app.batch.models import BatchTask, TaskResult

__all__ = ["Backend", "ResultCallback", "StartCallback"]

StartCallback = Callable[[BatchTask], None]
#: Called once per task as soon as it ends, from the runner's event loop.
ResultCallback = Callable[[TaskResult], None]


class Backend(Protocol):
    name: str

    async def run(
        self,
        tasks: Sequence[BatchTask],
        settings: ExecutionSettings,
        *,
        concurrency: int,
        rate_limit: float | None,
        burst: int | None,
        on_start: StartCallback,
        on_result: ResultCallback,
    ) -> None:
        """Run every task, calling ``on_start``/``on_result`` as each begins and ends."""
