"""First runs in fresh processes: what a run costs when everything it imports counts.

Per history length and loop, ``python -m bench.first_run`` runs once in a new interpreter:
the figure is the time from before its first import to the end of the run, per step. For the
10-step run the whole process is also timed, start to exit, and so is ``python main.py -p``
(Manus, the command a user runs) against the same server. Loops and repetitions alternate, so
drift in the machine's load hits all of them alike; figures are medians.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["COLD_LOOPS", "WHOLE_PROCESS_STEPS", "measure_cold"]

ROOT = Path(__file__).resolve().parent.parent
COLD_LOOPS = ("ours", "raw_http")
#: The run whose whole process (start to exit) is timed.
WHOLE_PROCESS_STEPS = 10


def _timed(command: list[str], cwd: Path) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=600)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
    return wall, done.stdout


def _first_run(loop: str, url: str, steps: int, workload: Path) -> tuple[float, float]:
    """(seconds from before the first import to the end of the run, whole-process seconds)."""
    wall, out = _timed(
        [sys.executable, "-m", "bench.first_run", loop, url, "echo", str(steps), str(workload)],
        ROOT,
    )
    result = json.loads(out.strip().splitlines()[-1])
    if result["steps"] != steps:
        raise RuntimeError(f"{loop} ran {result['steps']} of {steps} steps")
    return result["seconds"], wall


def _main_py(url: str, work: Path) -> float:
    """Whole-process seconds of ``python main.py -p`` for a 10-step Manus run."""
    config = work / "config.toml"
    # finish-9: nine echo calls (unknown to Manus: each is an error result, one step each),
    # then terminate on step 10.
    config.write_text(
        f'[llm]\nmodel = "finish-{WHOLE_PROCESS_STEPS - 1}"\nbase_url = "{url}"\n'
        'api_key = "sk-bench-0123456789abcdef"\nmax_retries = 0\n',
        encoding="utf-8",
    )
    wall, out = _timed(
        [sys.executable, "main.py", "-c", str(config), "-w", str(work / "ws"), "--no-session",
         "-q", "--max-steps", str(WHOLE_PROCESS_STEPS + 2), "-p", "Repeat after me."],
        ROOT,
    )
    if f"Step {WHOLE_PROCESS_STEPS}:" not in out:
        raise RuntimeError(f"main.py did not finish in {WHOLE_PROCESS_STEPS} steps:\n{out[-2000:]}")
    return wall


def measure_cold(url: str, step_counts: list[int], reps: int) -> dict[str, Any]:
    """Median figures: ``first_run_ms_per_step[loop][n]``, ``process_s[label]``."""
    from bench.loops import workload

    per_step: dict[tuple[str, int], list[float]] = {}
    process: dict[str, list[float]] = {}
    counts = sorted(set(step_counts) | {WHOLE_PROCESS_STEPS})
    with tempfile.TemporaryDirectory(prefix="bench-cold-") as tmp:
        work = Path(tmp)
        path = work / "workload.json"
        path.write_text(json.dumps(workload()), encoding="utf-8")
        for _ in range(reps):
            for steps in counts:
                for loop in COLD_LOOPS:
                    seconds, wall = _first_run(loop, url, steps, path)
                    per_step.setdefault((loop, steps), []).append(1000 * seconds / steps)
                    if steps == WHOLE_PROCESS_STEPS:
                        process.setdefault(loop, []).append(wall)
            process.setdefault("main.py", []).append(_main_py(url, work))
    return {
        "first_run_ms_per_step": {
            loop: {str(n): statistics.median(per_step[(loop, n)]) for n in counts}
            for loop in COLD_LOOPS
        },
        "process_s": {label: statistics.median(values) for label, values in process.items()},
    }
