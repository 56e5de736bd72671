"""The ``local`` backend: every task on one asyncio event loop in this process.

What it isolates: an exception escaping an agent, an LLM failure, a hang or a task running past
its timeout end only that task (the task is cancelled and its tools cleaned up). What it cannot
isolate: something that takes the whole process down (a segfault in an extension, ``os._exit``,
the OOM killer) or code that blocks the event loop. Such a batch stops, and running it again
resumes with every finished result kept. Use the ``ray`` backend to put tasks in worker
processes.
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
