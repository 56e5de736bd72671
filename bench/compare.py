"""This tree against an earlier commit, side by side in one run: ``python -m bench.compare REV``.

The earlier tree's ``app`` (and ``main.py``) is exported from git into a temporary directory
with this tree's ``bench`` beside it, so the same measuring code drives both. Against one
bench server, rounds alternate between the trees (drift in the machine's load hits both
alike), each round measuring in a fresh process per tree:

* per step, steady state: ``ours`` and the raw-HTTP floor at each history length (the
  ``steps`` worker: ``bench.steps.measure_steps``, warm-up first);
* the whole process of a 10-step run, start to exit: ``bench.first_run``, ours of each tree
  and the raw-HTTP script, alternating.

Figures are medians over rounds; targets as in ``python -m bench`` (``STEP_TARGET``,
``PROCESS_TARGET``), plus "no slower than before" per step.
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from bench.__main__ import PROCESS_TARGET, STEP_TARGET, _Server, _worker
from bench.cold import WHOLE_PROCESS_STEPS, _env, _first_run
from bench.loops import workload

ROOT = Path(__file__).resolve().parent.parent
#: "No slower than before", within the noise of a shared machine's medians.
SAME_SPEED = 1.05


def export(rev: str, into: Path) -> Path:
    """The tree at ``rev`` (``app``, ``main.py``), with this tree's ``bench``, in ``into``."""
    archive = subprocess.run(
        ["git", "archive", "--format=tar", rev, "app", "main.py"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    shutil.copytree(ROOT / "bench", into / "bench", ignore=shutil.ignore_patterns("__pycache__"))
    return into


def compare(
    rev: str, counts: list[int], rounds: int, reps: int, samples: int, now: str | None = None
) -> dict[str, Any]:
    """Median per-step wall ms (``steps[tree][loop][n]``) and whole-process seconds
    (``process[label]``) of this tree (``now``; or the commit ``now``, when others' edits
    in the working tree are half done) and ``rev`` (``before``)."""
    steps: dict[str, dict[str, dict[int, list[float]]]] = {}
    process: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-compare-") as tmp:
        work = Path(tmp)
        current = ROOT if now is None else export(now, work / "now")
        trees = {"now": current, "before": export(rev, work / "before")}
        path = work / "workload.json"
        path.write_text(json.dumps(workload()), encoding="utf-8")
        env = _env(work / "pycache")
        with _Server() as url:
            for tree in trees.values():  # untimed: fills the bytecode caches
                _first_run_in(tree, "ours", url, 1, path, env)
            for _ in range(rounds):
                for name, tree in trees.items():
                    figures = _worker("steps", ",".join(map(str, counts)), str(reps), url, cwd=tree)
                    for loop, by_count in figures.items():
                        target = steps.setdefault(name, {}).setdefault(loop, {})
                        for n, value in by_count.items():
                            target.setdefault(int(n), []).append(value)
            for _ in range(samples):
                for label, tree, loop in (
                    ("now", current, "ours"),
                    ("before", trees["before"], "ours"),
                    ("raw_http", current, "raw_http"),
                ):
                    wall = _first_run_in(tree, loop, url, WHOLE_PROCESS_STEPS, path, env)
                    process.setdefault(label, []).append(wall)
    return {
        "rev": rev,
        "now": now,
        "steps": {
            name: {
                loop: {n: statistics.median(v) for n, v in by_count.items()}
                for loop, by_count in loops.items()
            }
            for name, loops in steps.items()
        },
        "process_s": {label: statistics.median(v) for label, v in process.items()},
        "process_samples": {label: len(v) for label, v in process.items()},
    }


def _first_run_in(
    tree: Path, loop: str, url: str, steps: int, workload_path: Path, env: dict[str, str]
) -> float:
    """Whole-process seconds of one ``bench.first_run`` in ``tree``."""
    return _first_run(loop, url, steps, workload_path, env, cwd=tree)[2]


def render(figures: dict[str, Any], counts: list[int]) -> str:
    now, before = figures["steps"]["now"], figures["steps"]["before"]
    lines = [
        f"{figures['now'] or 'This tree'} against {figures['rev']}, per step (wall ms, median "
        "of rounds; the raw floor as measured beside each tree)",
        f"{'':34}" + "".join(f"{n:>12} steps" for n in counts),
    ]
    rows = (
        ("ours, this tree", now["ours"]),
        (f"ours, {figures['rev'][:10]}", before["ours"]),
        ("raw HTTP (beside this tree)", now["raw_http"]),
        ("raw HTTP (beside the other)", before["raw_http"]),
    )
    for label, values in rows:
        lines.append(f"{label:34}" + "".join(f"{values[n]:>18.3f}" for n in counts))
    ratio_now = {n: now["ours"][n] / now["raw_http"][n] for n in counts}
    ratio_before = {n: before["ours"][n] / before["raw_http"][n] for n in counts}
    speed = {n: ratio_now[n] / ratio_before[n] for n in counts}
    lines.append(
        f"{'ours / raw HTTP, this tree':34}" + "".join(f"{ratio_now[n]:>17.2f}x" for n in counts)
    )
    lines.append(
        f"{'ours / raw HTTP, the other':34}" + "".join(f"{ratio_before[n]:>17.2f}x" for n in counts)
    )
    lines.append(
        f"{'this tree / the other (ratios)':34}" + "".join(f"{speed[n]:>17.2f}x" for n in counts)
    )
    step_ok = all(ratio_now[n] <= STEP_TARGET for n in counts)
    same_ok = all(speed[n] <= SAME_SPEED for n in counts)
    lines.append(
        f"  target within {STEP_TARGET}x of raw HTTP: {'met' if step_ok else 'NOT MET'}; "
        f"no slower than before (<= {SAME_SPEED}x): {'met' if same_ok else 'NOT MET'}"
    )
    process = figures["process_s"]
    raw = process["raw_http"]
    lines.append(
        f"Whole process of a {WHOLE_PROCESS_STEPS}-step run (median of "
        f"{figures['process_samples']['raw_http']}): raw HTTP script {raw:.3f} s, this tree "
        f"{process['now']:.3f} s ({process['now'] / raw:.2f}x), the other "
        f"{process['before']:.3f} s ({process['before'] / raw:.2f}x); target "
        f"{PROCESS_TARGET}x: {'met' if process['now'] / raw <= PROCESS_TARGET else 'NOT MET'}"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.compare", description=__doc__)
    parser.add_argument("rev", help="the commit to compare with (e.g. HEAD~3, a hash)")
    parser.add_argument("--now", metavar="REV", help="a commit to measure instead of this tree")
    parser.add_argument("--steps", default="10,50,200", help="history lengths")
    parser.add_argument("--rounds", type=int, default=3, help="alternations of the two trees")
    parser.add_argument("--reps", type=int, default=3, help="repetitions within a round")
    parser.add_argument("--samples", type=int, default=15, help="whole-process runs per tree")
    parser.add_argument("--quick", action="store_true", help="a smoke run (one round, 5 samples)")
    parser.add_argument("--json", metavar="PATH", help="also write the raw figures here")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.reps, args.samples = 1, 1, 5
    counts = [int(s) for s in args.steps.split(",") if s.strip()]
    figures = compare(args.rev, counts, args.rounds, args.reps, args.samples, args.now)
    print(render(figures, counts), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
