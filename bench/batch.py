"""Batch throughput: tasks per second at several concurrency levels, local and Ray backends.

Every task is a ``toolcall`` agent answered by the scripted server after ``--latency``
seconds (a stand-in for the model's think time), so the numbers show the runner's overhead
and how well concurrency hides model latency. Run from the project root::

    .venv/bin/python bench/batch.py                      # local and ray, 1 8 64 256
    .venv/bin/python bench/batch.py --backends local --levels 1 8 --latency 0
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.batch import BatchOptions, run_batch
from app.config import LLMSettings, config
from app.logger import define_log_level
from app.testing import KeyedScripts, ScriptedLLMServer, slow, text

__all__ = ["main"]


async def measure(
    backend: str,
    concurrency: int,
    count: int,
    latency: float,
    server: ScriptedLLMServer,
    work: Path,
) -> dict[str, float | int | str]:
    prompts = [f"Task {backend}-{concurrency}-{i}" for i in range(count)]
    reply = (lambda i: slow(latency, text(f"a{i}"))) if latency > 0 else (lambda i: text(f"a{i}"))
    server.responder = KeyedScripts({p: [reply(i)] for i, p in enumerate(prompts)})
    tasks = work / f"{backend}-{concurrency}.jsonl"
    tasks.write_text(
        "".join(
            json.dumps({"id": str(i), "prompt": p, "agent": "toolcall"}) + "\n"
            for i, p in enumerate(prompts)
        )
    )
    started = time.perf_counter()
    report = await run_batch(
        BatchOptions(
            tasks=tasks,
            output=work / f"{backend}-{concurrency}.out.jsonl",
            backend=backend,
            concurrency=concurrency,
            progress=False,
            workspace_root=work / "ws",
        )
    )
    elapsed = time.perf_counter() - started
    assert report.summary.done == count, report.summary.render()
    return {
        "backend": backend,
        "concurrency": concurrency,
        "tasks": count,
        "seconds": round(elapsed, 3),
        "tasks_per_second": round(count / elapsed, 2),
        "p50_latency": report.summary.latency["p50"],
    }


async def run(args: argparse.Namespace) -> list[dict[str, float | int | str]]:
    rows = []
    with ScriptedLLMServer() as server, tempfile.TemporaryDirectory() as tmp:
        config.use(
            LLMSettings(
                model="gpt-4o-mini", base_url=server.base_url, api_key="sk-bench", max_retries=0
            )
        )
        for backend in args.backends:
            runtime = _ray_runtime(Path(tmp)) if backend == "ray" else contextlib.nullcontext()
            with runtime:
                for level in args.levels:
                    count = max(args.min_tasks, level * args.tasks_per_slot)
                    row = await measure(backend, level, count, args.latency, server, Path(tmp))
                    rows.append(row)
                    print(
                        f"{backend:>5}  concurrency {level:>4}  {count:>5} tasks  "
                        f"{row['seconds']:>7.2f} s  {row['tasks_per_second']:>8.2f} tasks/s",
                        flush=True,
                    )
    return rows


@contextlib.contextmanager
def _ray_runtime(tmp: Path) -> Iterator[None]:
    """A local Ray runtime for the block (its files under ``tmp``)."""
    import ray

    ray.init(
        address="local",
        include_dashboard=False,
        log_to_driver=False,
        _temp_dir=str(tmp / "ray"),
    )
    try:
        yield
    finally:
        ray.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backends", nargs="+", default=["local", "ray"], choices=["local", "ray"])
    parser.add_argument("--levels", nargs="+", type=int, default=[1, 8, 64, 256])
    parser.add_argument(
        "--latency",
        type=float,
        default=0.2,
        help="seconds the scripted model takes per reply (default 0.2)",
    )
    parser.add_argument(
        "--tasks-per-slot", type=int, default=2, help="tasks per concurrent slot (default 2)"
    )
    parser.add_argument("--min-tasks", type=int, default=16)
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    args = parser.parse_args()
    define_log_level(print_level="ERROR", logfile_level=None)
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    rows = asyncio.run(run(args))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
