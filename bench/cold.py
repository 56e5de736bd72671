"""First runs in fresh processes: what a run costs when everything it imports counts.

Per history length and loop, ``python -m bench.first_run`` runs once in a new interpreter:
the figure is the time from before its first import to the end of the run, per step. For the
10-step run the whole process is also timed, start to exit, and so is ``python main.py -p``
(Manus, the command a user runs) against the same server. Loops and repetitions alternate, so
drift in the machine's load hits all of them alike; figures are medians.

Every process reads compiled bytecode, as an installed package does (pip compiles it at
install time): the processes share a bytecode cache in a temporary directory
(``PYTHONPYCACHEPREFIX``), filled by one untimed run of each command first. Without it, with
``PYTHONDONTWRITEBYTECODE`` set and no ``__pycache__`` in the checkout, every run of ours would
compile the whole package from source while the raw loop reads the HTTP client's bytecode from
site-packages: a figure about the compiler, not about the loop.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["COLD_LOOPS", "MIN_PROCESS_SAMPLES", "WHOLE_PROCESS_STEPS", "measure_cold"]

ROOT = Path(__file__).resolve().parent.parent
COLD_LOOPS = ("ours", "raw_http")
#: The run whose whole process (start to exit) is timed.
WHOLE_PROCESS_STEPS = 10
#: A whole process lasts under a second, so a few tens of ms of machine noise move one
#: sample by a tenth: that figure takes at least this many samples per loop (alternating
#: loops, about a second a pair), whatever ``reps`` is.
MIN_PROCESS_SAMPLES = 15


def _env(pycache: Path) -> dict[str, str]:
    """The environment of every timed process: one shared bytecode cache, written to."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("PYTHONPROFILEIMPORTTIME", None)
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    return env


def _timed(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=600, env=env)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
    return wall, done.stdout


def _first_run(
    loop: str, url: str, steps: int, workload: Path, env: dict[str, str], cwd: Path = ROOT
) -> tuple[float, float, float]:
    """(seconds from before the first import to the end of the run, seconds of the run
    itself with its own imports, whole-process seconds), of the tree at ``cwd``."""
    wall, out = _timed(
        [sys.executable, "-m", "bench.first_run", loop, url, "echo", str(steps), str(workload)],
        cwd,
        env,
    )
    result = json.loads(out.strip().splitlines()[-1])
    if result["steps"] != steps:
        raise RuntimeError(f"{loop} ran {result['steps']} of {steps} steps")
    return result["seconds"], result["run_seconds"], wall


def _main_py(url: str, work: Path, env: dict[str, str]) -> float:
    """Whole-process seconds of ``python main.py -p`` for a 10-step Manus run."""
    config = work / "config.toml"
    # finish-9: nine echo calls (unknown to Manus: each is an error result, one step each),
    # then terminate on step 10.
    config.write_text(
        f'[llm]\nmodel = "finish-{WHOLE_PROCESS_STEPS - 1}"\nbase_url = "{url}"\n'
        'api_key = "sk-bench-0123456789abcdef"\nmax_retries = 0\n',
        encoding="utf-8",
    )
    wall, _ = _timed(
        [
            sys.executable,
            "main.py",
            "-c",
            str(config),
            "-w",
            str(work / "ws"),
            "--no-session",
            "-q",
            "--max-steps",
            str(WHOLE_PROCESS_STEPS),
            "-p",
            "Repeat after me.",
        ],
        ROOT,
        env,
    )
    # Exit 0 (checked by _timed) within exactly that step budget: the model terminates only
    # after nine tool results, so the run took all ten steps.
    return wall


def measure_cold(
    url: str, step_counts: list[int], reps: int, process_samples: int = MIN_PROCESS_SAMPLES
) -> dict[str, Any]:
    """Median figures: ``first_run_ms_per_step[loop][n]`` (imports included),
    ``first_agent_run_ms_per_step[loop][n]`` (the run and its own imports), ``process_s``
    (and how many samples each whole-process figure took, ``process_samples``: at least
    ``process_samples`` for the two loops, ``reps`` for ``main.py``)."""
    from bench.loops import workload

    per_step: dict[tuple[str, int], list[float]] = {}
    run_step: dict[tuple[str, int], list[float]] = {}
    process: dict[str, list[float]] = {}
    counts = sorted(set(step_counts) | {WHOLE_PROCESS_STEPS})
    with tempfile.TemporaryDirectory(prefix="bench-cold-") as tmp:
        work = Path(tmp)
        path = work / "workload.json"
        path.write_text(json.dumps(workload()), encoding="utf-8")
        env = _env(work / "pycache")
        for loop in COLD_LOOPS:  # untimed: fills the bytecode cache
            _first_run(loop, url, 1, path, env)
        _main_py(url, work, env)
        for _ in range(reps):
            for steps in counts:
                for loop in COLD_LOOPS:
                    seconds, run, wall = _first_run(loop, url, steps, path, env)
                    per_step.setdefault((loop, steps), []).append(1000 * seconds / steps)
                    run_step.setdefault((loop, steps), []).append(1000 * run / steps)
                    if steps == WHOLE_PROCESS_STEPS:
                        process.setdefault(loop, []).append(wall)
            process.setdefault("main.py", []).append(_main_py(url, work, env))
        for _ in range(process_samples - reps):  # more samples of the whole process only
            for loop in COLD_LOOPS:
                seconds, run, wall = _first_run(loop, url, WHOLE_PROCESS_STEPS, path, env)
                per_step[(loop, WHOLE_PROCESS_STEPS)].append(1000 * seconds / WHOLE_PROCESS_STEPS)
                run_step[(loop, WHOLE_PROCESS_STEPS)].append(1000 * run / WHOLE_PROCESS_STEPS)
                process[loop].append(wall)
    return {
        "first_run_ms_per_step": {
            loop: {str(n): statistics.median(per_step[(loop, n)]) for n in counts}
            for loop in COLD_LOOPS
        },
        "first_agent_run_ms_per_step": {
            loop: {str(n): statistics.median(run_step[(loop, n)]) for n in counts}
            for loop in COLD_LOOPS
        },
        "process_s": {label: statistics.median(values) for label, values in process.items()},
        "process_samples": {label: len(values) for label, values in process.items()},
    }
