"""Batch runs: many tasks from a JSONL file, each in its own workspace and agent, on the local
event loop or on a Ray cluster, with resumable JSONL results and a summary.

``python -m app.batch tasks.jsonl -o results.jsonl`` from the shell; from code::

    from app.batch import BatchOptions, run_batch
    report = await run_batch(BatchOptions(tasks=Path("tasks.jsonl"), output=Path("out.jsonl")))
"""

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
