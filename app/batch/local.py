"""The ``local`` backend: every task on one asyncio event loop in this process.

An exception, LLM failure, hang or timeout ends only its task; a crash of the whole process
(segfault, ``os._exit``, OOM killer) or a blocked event loop stops the batch, and rerunning it
resumes with every finished result kept. The ``ray`` backend uses worker processes instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from app.batch.backend import ResultCallback, StartCallback
from app.batch.execute import ExecutionSettings, execute_task
from app.batch.models import BatchTask
from app.batch.ratelimit import LocalRateLimiter

__all__ = ["LocalBackend"]


class LocalBackend:
    name = "local"

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
        gate = LocalRateLimiter(rate_limit, burst) if rate_limit else None
        queue = iter(tasks)

        async def worker() -> None:
            for task in queue:  # a shared iterator: each task is taken exactly once
                on_start(task)
                on_result(await execute_task(task, settings, gate))

        async with asyncio.TaskGroup() as group:
            for _ in range(max(1, min(concurrency, len(tasks)))):
                group.create_task(worker())
