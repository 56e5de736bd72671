"""The ``ray`` backend: tasks run in worker actors on a Ray cluster (the ``ray`` extra).

``workers`` async actors (default: one per CPU, at most one per concurrent task) each run up
to ``ceil(concurrency / workers)`` tasks on their own event loop, so a few processes carry
hundreds of agents waiting on the LLM. A worker process that dies is replaced, and its tasks
rerun alone in a quarantine worker: only a task that kills that one too is ``CRASHED``. A
worker silent for ``timeout + grace`` is replaced the same way (its task: ``TIMEOUT``). One
small actor owns the rate-limit schedule, so the limit holds cluster-wide (docs/batch.md).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app.batch.execute import ExecutionSettings, execute_task, workspace_for
from app.batch.models import (
    FAILED,
    BatchTask,
    ResultCallback,
    StartCallback,
    TaskResult,
    TaskState,
)
from app.batch.ratelimit import RateSchedule
from app.config import config
from app.exceptions import BatchBackendError, ConfigError
from app.logger import define_log_level
from app.sandbox.hostside import ray_runtime_env

#: Extra seconds past a task's timeout before its worker counts as unresponsive.
DEFAULT_GRACE = 30.0


def import_ray() -> Any:
    try:
        import ray
    except ImportError as e:
        raise ConfigError(
            "the ray backend needs Ray: pip install -e '.[ray]' (or pip install ray)"
        ) from e
    return ray


class RateLimiterActor:
    """Owns the cluster-wide request schedule; answers with the delay a caller must wait."""

    def __init__(self, per_minute: float, burst: int | None) -> None:
        self.schedule = RateSchedule(per_minute, burst)

    def reserve(self) -> float:
        return self.schedule.reserve()


class BatchWorker:
    """One worker process: the driver's config, then tasks on its event loop."""

    def __init__(
        self, app_config: Any, settings: ExecutionSettings, limiter: Any, log_level: str
    ) -> None:
        define_log_level(print_level=log_level, logfile_level=None)
        if app_config is not None:
            config.use(app_config)
        self.settings = settings
        self.limiter = limiter

    async def _gate(self) -> None:
        delay = await self.limiter.reserve.remote()
        if delay > 0:
            await asyncio.sleep(delay)

    async def run(self, task: dict[str, Any]) -> dict[str, Any]:
        gate = self._gate if self.limiter is not None else None
        result = await execute_task(BatchTask.model_validate(task), self.settings, gate)
        return result.model_dump()


class RayBackend:
    """Runs a batch on Ray: joins ``address`` or starts a local Ray (stopped afterwards)."""

    name = "ray"

    def __init__(
        self,
        address: str | None = None,
        *,
        workers: int | None = None,
        num_cpus: int | None = None,
        temp_dir: str | Path | None = None,
        runtime_env: dict[str, Any] | None = None,
        log_level: str = "ERROR",
        grace: float = DEFAULT_GRACE,
        app_config: Any = None,
    ) -> None:
        if workers is not None and workers < 1:
            raise ConfigError(f"--ray-workers must be at least 1, not {workers}")
        self.address = address
        self.workers = workers
        self.num_cpus = num_cpus
        self.temp_dir = str(temp_dir) if temp_dir is not None else None
        self.runtime_env = runtime_env
        self.log_level = log_level
        self.grace = grace
        self.app_config = app_config

    # ---- cluster -------------------------------------------------------------------------------

    def _init(self, ray: Any) -> bool:
        """Connect or start; True when this backend started Ray (and must stop it)."""
        if ray.is_initialized():
            return False
        # Workers run, and import, outside the driver's working directory (a workspace?).
        runtime_env = ray_runtime_env(self.runtime_env)
        common: dict[str, Any] = {"log_to_driver": False, "runtime_env": runtime_env}
        try:
            if self.address:
                ray.init(address=self.address, **common)
            else:
                ray.init(
                    address="local",
                    include_dashboard=False,
                    num_cpus=self.num_cpus,
                    _temp_dir=self.temp_dir,
                    **common,
                )
        except Exception as e:
            where = f"join the Ray cluster at {self.address}" if self.address else "start Ray"
            raise BatchBackendError(f"could not {where}: {e}") from e
        return True

    # ---- running -------------------------------------------------------------------------------

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
        ray = import_ray()
        if not tasks:
            return
        started = await asyncio.to_thread(self._init, ray)
        actors: list[Any] = []
        try:
            await self._run(
                ray, actors, tasks, settings, concurrency, rate_limit, burst, on_start, on_result
            )
        finally:
            for actor in actors:
                try:
                    ray.kill(actor)
                except Exception:  # already gone
                    pass
            if started:
                await asyncio.to_thread(ray.shutdown)

    async def _run(
        self,
        ray: Any,
        actors: list[Any],
        tasks: Sequence[BatchTask],
        settings: ExecutionSettings,
        concurrency: int,
        rate_limit: float | None,
        burst: int | None,
        on_start: StartCallback,
        on_result: ResultCallback,
    ) -> None:
        concurrency = max(1, min(concurrency, len(tasks)))
        cpus = int(ray.cluster_resources().get("CPU", 1)) or 1
        count = max(1, min(self.workers or cpus, concurrency))
        per_worker = math.ceil(concurrency / count)

        limiter = None
        if rate_limit:
            limiter = ray.remote(num_cpus=0)(RateLimiterActor).remote(rate_limit, burst)
            actors.append(limiter)
        worker_cls = ray.remote(BatchWorker)
        args = (self.app_config, settings, limiter, self.log_level)

        def spawn(max_concurrency: int) -> Any:
            actor = worker_cls.options(
                num_cpus=0,
                max_concurrency=max_concurrency,
                max_restarts=0,
                scheduling_strategy="SPREAD",
            ).remote(*args)
            actors.append(actor)
            return actor

        # A dead worker is replaced by a fresh actor at once (rather than restarted by Ray),
        # so a task is never sent to a worker that is still coming back.
        workers = [spawn(per_worker) for _ in range(count)]
        quarantine = [spawn(1)]
        load = [0] * count
        solo = asyncio.Lock()
        queue = iter(tasks)

        def replace(pool: list[Any], index: int, dead: Any, max_concurrency: int) -> None:
            if pool[index] is dead:
                pool[index] = spawn(max_concurrency)

        async def one(task: BatchTask) -> TaskResult:
            index = min(range(count), key=load.__getitem__)
            actor = workers[index]
            load[index] += 1
            try:
                outcome, gone = await self._call(ray, actor, task, settings)
            finally:
                load[index] -= 1
            if gone:
                replace(workers, index, actor, per_worker)
            if isinstance(outcome, TaskResult):
                return outcome
            async with solo:  # its worker died: run it again alone to find the culprit
                alone = quarantine[0]
                retry, gone = await self._call(ray, alone, task, settings)
                if gone:
                    replace(quarantine, 0, alone, 1)
            if isinstance(retry, TaskResult):
                return retry
            return _failure(
                task,
                settings,
                "CRASHED",
                f"the worker process died while running this task (twice, the "
                f"second time alone): {retry}",
            )

        async def drive() -> None:
            for task in queue:
                on_start(task)
                on_result(await one(task))

        async with asyncio.TaskGroup() as group:
            for _ in range(concurrency):
                group.create_task(drive())

    async def _call(
        self, ray: Any, actor: Any, task: BatchTask, settings: ExecutionSettings
    ) -> tuple[TaskResult | str, bool]:
        """The task's result (or a description of how its worker died), and whether the
        worker is gone and must be replaced."""
        started = time.time()
        limit = (task.timeout or settings.timeout) + self.grace
        ref = actor.run.remote(task.model_dump())
        try:
            data = await asyncio.wait_for(_await(ref), limit)
        except TimeoutError:
            ray.kill(actor)  # its loop is stuck; the tasks there are run again elsewhere
            return _failure(
                task,
                settings,
                "TIMEOUT",
                f"the worker did not answer within {limit:g} s; it was replaced",
                started,
            ), True
        except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError) as e:
            text = str(e).strip()
            return (text.splitlines()[0] if text else type(e).__name__), True
        except ray.exceptions.RayError as e:
            return _failure(task, settings, "CRASHED", f"{type(e).__name__}: {e}", started), False
        return TaskResult.model_validate(data), False


async def _await(ref: Any) -> Any:
    return await ref


def _failure(
    task: BatchTask,
    settings: ExecutionSettings,
    state: TaskState,
    error: str,
    started: float | None = None,
) -> TaskResult:
    now = time.time()
    return TaskResult(
        id=task.id,
        status=FAILED,
        state=state,
        error=error,
        expected=task.expected,
        correct=False if task.expected is not None else None,
        agent=task.agent,
        flow=task.flow,
        workspace=str(workspace_for(settings.workspace_root, task.id)),
        started_at=started or now,
        duration=round(now - (started or now), 4),
    )
