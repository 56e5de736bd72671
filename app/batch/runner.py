"""A batch run: read the tasks, skip the finished ones, run the rest, keep every result.

``run_batch(BatchOptions(...))`` is the library entry point; ``python -m app.batch`` wraps it.
The same tasks, results file and resume rules apply to every backend.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from app.batch.agents import check_agent_name
from app.batch.execute import DEFAULT_TIMEOUT, ExecutionSettings, execute_task
from app.batch.flows import check_flow_name
from app.batch.jsonl import ResultLog, load_tasks
from app.batch.models import BatchTask, ResultCallback, StartCallback, TaskResult
from app.batch.progress import Progress
from app.batch.ratelimit import RateSchedule
from app.batch.ray_backend import RayBackend
from app.batch.summary import BatchSummary, summarize
from app.config import config
from app.exceptions import ConfigError


@dataclass
class BatchOptions:
    """Everything a batch run needs; see ``python -m app.batch --help`` for each option."""

    tasks: Path
    output: Path
    backend: str = "local"
    concurrency: int = 8
    rate_limit: float | None = None  # LLM requests per minute, for the whole batch
    burst: int | None = None
    timeout: float = DEFAULT_TIMEOUT
    max_steps: int | None = None
    agent: str | None = None  # for tasks that name none
    workspace_root: Path | None = None
    retry_failed: bool = False
    input_price: float | None = None
    output_price: float | None = None
    config_path: Path | None = None
    progress: bool = True
    progress_stream: TextIO | None = None
    backend_options: dict[str, Any] = field(default_factory=dict)

    def check(self) -> None:
        if self.concurrency < 1:
            raise ConfigError(f"--concurrency must be at least 1, not {self.concurrency}")
        if self.timeout <= 0:
            raise ConfigError(f"--timeout must be positive, not {self.timeout}")
        if self.rate_limit is not None and self.rate_limit <= 0:
            raise ConfigError(f"--rate-limit must be positive, not {self.rate_limit}")
        if self.burst is not None and self.burst < 1:
            raise ConfigError(f"--burst must be at least 1, not {self.burst}")
        if self.max_steps is not None and self.max_steps < 1:
            raise ConfigError(f"--max-steps must be at least 1, not {self.max_steps}")
        for name, price in (("input", self.input_price), ("output", self.output_price)):
            if price is not None and price < 0:
                raise ConfigError(f"--{name}-price must not be negative")


@dataclass
class BatchReport:
    summary: BatchSummary
    results: dict[str, TaskResult]  # the latest result of every task of the tasks file
    output: Path
    summary_path: Path


def summary_path_for(output: Path) -> Path:
    """``results.jsonl`` -> ``results.summary.json``."""
    return output.with_name(f"{output.stem}.summary.json")


def _workspace_root(options: BatchOptions) -> Path:
    if options.workspace_root is not None:
        return options.workspace_root.resolve()
    return options.output.resolve().with_name(f"{options.output.stem}_workspaces")


def _check_names(tasks: list[BatchTask], default_agent: str | None) -> None:
    for name in {t.agent or default_agent for t in tasks}:
        check_agent_name(name)
    for name in {t.flow for t in tasks if t.flow}:
        check_flow_name(name)


async def run_batch(options: BatchOptions) -> BatchReport:
    """Run the batch; results are in ``options.output`` as each task ends.

    Bad input (tasks file, options, config, agent or flow names) raises ``ConfigError`` before
    any task starts. Cancelling the call stops the running tasks; their results are not
    written, so the next run does them again.
    """
    options.check()
    tasks = load_tasks(options.tasks)
    if options.agent:
        tasks = [t if t.agent else t.model_copy(update={"agent": options.agent}) for t in tasks]
    _check_names(tasks, None)
    if options.config_path is not None:
        config.load(options.config_path)
    backend_options = dict(options.backend_options)
    if options.backend == "ray":
        backend_options.setdefault("app_config", config.app_config)
    else:
        config.llm  # noqa: B018 - a broken config fails here, not in every task
    run_backend = _backend(options.backend, **backend_options)

    settings = ExecutionSettings(
        workspace_root=_workspace_root(options),
        timeout=options.timeout,
        max_steps=options.max_steps,
        input_price=options.input_price,
        output_price=options.output_price,
    )
    summary_path = summary_path_for(options.output)
    started = time.monotonic()
    ran = 0
    log = await asyncio.to_thread(ResultLog(options.output).open)
    try:
        earlier, retry = log.results, options.retry_failed
        pending = [t for t in tasks if t.id not in earlier or (retry and not earlier[t.id].ok)]
        skipped = len(tasks) - len(pending)
        stream, enabled = options.progress_stream, options.progress
        progress = Progress(len(tasks), skipped, stream=stream, enabled=enabled)

        def on_result(result: TaskResult) -> None:
            nonlocal ran
            log.append(result)
            ran += 1
            progress.task_ended(result.ok)

        try:
            await run_backend(
                pending,
                settings,
                concurrency=options.concurrency,
                rate_limit=options.rate_limit,
                burst=options.burst,
                on_start=lambda task: progress.task_started(),
                on_result=on_result,
            )
        finally:
            progress.close()
            current = {t.id: log.results[t.id] for t in tasks if t.id in log.results}
            summary = summarize(
                current.values(), total=len(tasks), ran=ran, wall_time=time.monotonic() - started
            )
            await asyncio.to_thread(
                summary_path.write_text, summary.model_dump_json(indent=2) + "\n", "utf-8"
            )
    finally:
        log.close()
    return BatchReport(
        summary=summary, results=current, output=options.output, summary_path=summary_path
    )


async def run_local(
    tasks: Sequence[BatchTask],
    settings: ExecutionSettings,
    *,
    concurrency: int,
    rate_limit: float | None,
    burst: int | None,
    on_start: StartCallback,
    on_result: ResultCallback,
) -> None:
    """The ``local`` backend: every task on this event loop. An exception, LLM failure, hang
    or timeout ends only its task; a crash of the whole process (segfault, ``os._exit``, OOM
    killer) or a blocked event loop stops the batch, and rerunning it resumes with every
    finished result kept. The ``ray`` backend uses worker processes instead."""
    schedule = RateSchedule(rate_limit, burst) if rate_limit else None

    async def gate() -> None:
        assert schedule is not None
        if (delay := schedule.reserve()) > 0:
            await asyncio.sleep(delay)

    queue = iter(tasks)

    async def worker() -> None:
        for task in queue:  # a shared iterator: each task is taken exactly once
            on_start(task)
            on_result(await execute_task(task, settings, gate if schedule else None))

    async with asyncio.TaskGroup() as group:
        for _ in range(max(1, min(concurrency, len(tasks)))):
            group.create_task(worker())


_BACKENDS = ("local", "ray")


def _backend(name: str, **options: Any) -> Callable[..., Awaitable[None]]:
    """The backend's ``run``: ``local`` takes no options; ``ray`` those of :class:`RayBackend`."""
    if name == "local":
        if options:
            raise ConfigError(f"the local backend takes no options ({', '.join(options)})")
        return run_local
    if name == "ray":
        return RayBackend(**options).run
    raise ConfigError(f"unknown backend {name!r}; choose one of: {', '.join(_BACKENDS)}")
