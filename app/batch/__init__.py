"""Batch runs: many tasks from a JSONL file, each in its own workspace and agent, on the local
event loop or on a Ray cluster, with resumable JSONL results and a summary.

``python -m app.batch tasks.jsonl -o results.jsonl`` from the shell; from code::

    from app.batch import BatchOptions, run_batch
    report = await run_batch(BatchOptions(tasks=Path("tasks.jsonl"), output=Path("out.jsonl")))

Names load lazily, so importing the package costs nothing until it is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from app._lazy import lazy_getattr

if TYPE_CHECKING:
    from app.batch.agents import register_agent
    from app.batch.execute import ExecutionSettings, execute_task
    from app.batch.jsonl import load_tasks, read_results
    from app.batch.models import BatchTask, TaskResult
    from app.batch.runner import BatchOptions, BatchReport, run_batch
    from app.batch.summary import BatchSummary

__all__ = [
    "BatchOptions",
    "BatchReport",
    "BatchSummary",
    "BatchTask",
    "ExecutionSettings",
    "TaskResult",
    "execute_task",
    "load_tasks",
    "read_results",
    "register_agent",
    "run_batch",
]

_LOCATIONS = {
    "BatchOptions": "app.batch.runner",
    "BatchReport": "app.batch.runner",
    "BatchSummary": "app.batch.summary",
    "BatchTask": "app.batch.models",
    "ExecutionSettings": "app.batch.execute",
    "TaskResult": "app.batch.models",
    "execute_task": "app.batch.execute",
    "load_tasks": "app.batch.jsonl",
    "read_results": "app.batch.jsonl",
    "register_agent": "app.batch.agents",
    "run_batch": "app.batch.runner",
}

__getattr__ = lazy_getattr(__name__, _LOCATIONS)
