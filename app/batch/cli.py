"""``python -m app.batch``: run a JSONL file of tasks, write a JSONL file of results.

Progress goes to stderr, the summary to stdout. Exit codes: 0 every task finished, 1 some
failed (their results are written), 2 bad input or configuration (or the backend could
not start), 130 interrupted (finished results are kept; run it again to resume).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
from pathlib import Path

from app.batch.runner import BatchOptions, run_batch
from app.exceptions import BatchBackendError, ConfigError
from app.logger import define_log_level

EXIT_OK, EXIT_FAILED, EXIT_CONFIG, EXIT_INTERRUPTED = 0, 1, 2, 130


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m app.batch",
        description="Run many agent tasks (one JSON object per line) and record one result "
        "per task. Rerunning with the same --output skips the tasks already recorded.",
    )
    p.add_argument("tasks", type=Path, help="tasks file (JSONL)")
    p.add_argument("-o", "--output", type=Path, required=True, help="results file (JSONL)")
    p.add_argument(
        "-c",
        "--config",
        type=Path,
        help="config file (default: $OPENMANUS_CONFIG, else config/config.toml)",
    )
    p.add_argument(
        "-b",
        "--backend",
        choices=("local", "ray"),
        default="local",
        help="where tasks run (default: local)",
    )
    p.add_argument(
        "-j", "--concurrency", type=int, default=8, help="tasks running at once (default: 8)"
    )
    p.add_argument(
        "--rate-limit",
        type=float,
        metavar="RPM",
        help="LLM requests per minute for the whole batch (default: no limit)",
    )
    p.add_argument(
        "--burst",
        type=int,
        help="requests allowed back to back under --rate-limit (default: RPM/60)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        help="seconds per task unless the task sets its own (default: 600)",
    )
    p.add_argument("--max-steps", type=int, help="step budget for tasks that set none")
    p.add_argument("--agent", help="agent for tasks that name none (default: manus)")
    p.add_argument(
        "--workspaces",
        type=Path,
        help="directory of the per-task workspaces (default: <output>_workspaces)",
    )
    p.add_argument(
        "--retry-failed",
        action="store_true",
        help="also run again the tasks whose recorded result failed",
    )
    p.add_argument(
        "--input-price",
        type=float,
        metavar="USD",
        help="price per million prompt tokens, for the cost columns",
    )
    p.add_argument(
        "--output-price", type=float, metavar="USD", help="price per million completion tokens"
    )
    p.add_argument("--no-progress", action="store_true", help="no progress line on stderr")
    p.add_argument(
        "-v", "--verbose", action="store_true", help="show the agents' log (default: errors only)"
    )
    ray = p.add_argument_group("ray backend")
    ray.add_argument(
        "--ray-address",
        help="join this cluster (e.g. ray://head:10001 or auto); "
        "default: start a local Ray for the run",
    )
    ray.add_argument(
        "--ray-workers",
        type=int,
        help="worker processes (default: one per CPU, at most --concurrency)",
    )
    ray.add_argument("--ray-num-cpus", type=int, help="CPUs of a local Ray (default: all)")
    ray.add_argument("--ray-temp-dir", help="temp directory of a local Ray")
    ray.add_argument(
        "--ray-runtime-env",
        type=json.loads,
        metavar="JSON",
        help="Ray runtime_env for the workers, as JSON",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    define_log_level(print_level="INFO" if args.verbose else "ERROR", logfile_level=None)
    ray_options: dict[str, object] = {
        "address": args.ray_address,
        "workers": args.ray_workers,
        "num_cpus": args.ray_num_cpus,
        "temp_dir": args.ray_temp_dir,
        "runtime_env": args.ray_runtime_env,
    }
    backend_options: dict[str, object] = {}
    if args.backend == "ray":
        backend_options = {**ray_options, "log_level": "INFO" if args.verbose else "ERROR"}
    elif any(v is not None for v in ray_options.values()):
        print("error: --ray-* options need --backend ray", file=sys.stderr)
        return EXIT_CONFIG
    options = BatchOptions(
        tasks=args.tasks,
        output=args.output,
        backend=args.backend,
        concurrency=args.concurrency,
        rate_limit=args.rate_limit,
        burst=args.burst,
        timeout=args.timeout,
        max_steps=args.max_steps,
        agent=args.agent,
        workspace_root=args.workspaces,
        retry_failed=args.retry_failed,
        input_price=args.input_price,
        output_price=args.output_price,
        config_path=args.config,
        progress=not args.no_progress,
        backend_options=backend_options,
    )
    try:
        return asyncio.run(_run(options))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


async def _run(options: BatchOptions) -> int:
    main_task = asyncio.current_task()
    assert main_task is not None
    interrupted = False
    loop = asyncio.get_running_loop()

    def stop() -> None:
        nonlocal interrupted
        interrupted = True
        main_task.cancel()

    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop)
    try:
        report = await run_batch(options)
    except (ConfigError, BatchBackendError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_CONFIG
    except asyncio.CancelledError:
        if not interrupted:
            raise
        print(
            f"interrupted: finished results are in {options.output}; run the same "
            "command again to resume",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    print(report.summary.render())
    print(f"results: {report.output}\nsummary: {report.summary_path}")
    return EXIT_OK if report.summary.failed == 0 and not report.summary.missing else EXIT_FAILED
