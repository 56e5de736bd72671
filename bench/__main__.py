"""``python -m bench``: the performance suite. Prints a table; it is not a test and asserts
nothing, but marks each target as met or not.

Everything runs against the scripted server on 127.0.0.1 (in its own process), and every
figure that is compared is measured in the same run, alternating between the loops.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench import real_model

__all__ = ["main"]

#: Per step, ours within this factor of the raw-HTTP floor, first run and steady state.
STEP_TARGET = 1.2
#: Whole process (start to exit) of a 10-step run, within this factor of the raw-HTTP script.
PROCESS_TARGET = 1.5

ROOT = Path(__file__).resolve().parent.parent


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "--reps",
        type=int,
        default=5,
        help="repetitions per figure (median); per-step figures repeat shorter histories more",
    )
    parser.add_argument("--steps", default="10,50,200", help="history lengths, comma-separated")
    parser.add_argument("--agents", type=int, default=1000, help="concurrent agents")
    parser.add_argument(
        "--parallel-calls", type=int, default=8, help="read-only tool calls in one message"
    )
    parser.add_argument(
        "--quick", action="store_true", help="a fast smoke run: few steps, agents and repetitions"
    )
    parser.add_argument("--json", metavar="PATH", help="also write the raw figures here")
    parser.add_argument(
        "--real-model",
        action="store_true",
        help="only the real-model figures (needs --base-url of a running server)",
    )
    parser.add_argument(
        "--web",
        action="store_true",
        help="only the web UI figures (needs the web extra and Chromium)",
    )
    real_model.add_arguments(parser)
    args = parser.parse_args(argv)
    if args.real_model and not args.base_url:
        parser.error("--real-model needs --base-url (start the model server first)")
    if args.quick:
        args.reps, args.steps, args.agents = 1, "3,6", 20
    args.step_counts = [int(s) for s in args.steps.split(",") if s.strip()]
    if not args.step_counts or min(args.step_counts) < 1 or args.reps < 1 or args.agents < 1:
        parser.error("--steps, --reps and --agents must be positive")
    return args


class _Server:
    """The bench server process (``python -m bench.server``); stops when stdin closes."""

    def __enter__(self) -> str:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.server"],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        url = self.proc.stdout.readline().strip()
        if not url.startswith("http://127.0.0.1:"):
            self.__exit__()
            raise RuntimeError(f"bench server did not start (printed {url!r})")
        return url

    def __exit__(self, *exc: object) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _worker(*args: str, cwd: Path = ROOT) -> dict[str, Any]:
    """What ``python -m bench.worker ARGS`` prints, run in the tree at ``cwd``."""
    out = subprocess.run(
        [sys.executable, "-m", "bench.worker", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if out.returncode != 0:
        raise RuntimeError(f"bench.worker {' '.join(args)} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _mark(ok: bool) -> str:
    return "met" if ok else "NOT MET"


def _versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    from bench.raw import http_client_name

    def of(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    client = http_client_name()
    return (
        f"Python {platform.python_version()}, openai {of('openai')}, raw HTTP on {client} "
        f"{of(client)}, {os.cpu_count()} CPUs, load average {load:.1f} at start"
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    from app.logger import define_log_level
    from bench.cold import MIN_PROCESS_SAMPLES, measure_cold
    from bench.parallel import measure_parallel
    from bench.startup import heavy_modules_loaded, measure_startup
    from bench.steps import LOOPS, RSS_LOOPS, measure_steps

    define_log_level("ERROR", "OFF")
    figures: dict[str, Any] = {"environment": _versions()}
    print(f"OpenManus-py benchmark: {figures['environment']}", flush=True)
    with _Server() as url:
        print(f"- per-step cost at {args.steps} steps, {args.reps} repetitions ...", flush=True)
        steps = asyncio.run(measure_steps(url, args.step_counts, args.reps))
        figures["steps"] = {
            f"{loop}@{n}": {"wall_ms": steps.wall[(loop, n)], "cpu_ms": steps.cpu[(loop, n)]}
            for loop in LOOPS
            for n in args.step_counts
        }
        longest = max(args.step_counts)
        print(f"- peak RSS of {longest}-step runs ...", flush=True)
        figures["rss_kb"] = {
            loop: _worker("rss", loop, str(longest), url)["peak_rss_kb"] for loop in RSS_LOOPS
        }
        print(f"- {args.agents} concurrent agents ...", flush=True)
        figures["swarm"] = _worker("swarm", str(args.agents), "3", url)
        print("- parallel tool calls ...", flush=True)
        figures["parallel"] = asyncio.run(
            measure_parallel(url, args.parallel_calls, 0.05, max(args.reps, 3))
        )
        print(
            f"- first runs in fresh processes at {args.steps} steps, and whole processes ...",
            flush=True,
        )
        # --quick: as many whole-process samples as repetitions (a smoke run).
        samples = args.reps if args.quick else max(args.reps, MIN_PROCESS_SAMPLES)
        figures["cold"] = measure_cold(url, args.step_counts, args.reps, samples)
        if args.quick:  # the real-model section's code path, on the scripted server
            print("- real-model section on the scripted server (stand-in) ...", flush=True)
            figures["real_model"] = asyncio.run(
                real_model.measure_real_model(url, "finish-2", steps=5)
            )
    print("- cold start ...", flush=True)
    figures["startup_s"] = measure_startup(max(args.reps, 5))
    help_code = (
        "import runpy, sys\nsys.argv = ['main.py', '--help']\n"
        "try:\n    runpy.run_path('main.py', run_name='__main__')\nexcept SystemExit:\n    pass"
    )
    figures["heavy_modules"] = {
        "python main.py --help": heavy_modules_loaded(help_code),
        "import app.agent.manus": heavy_modules_loaded("import app.agent.manus"),
    }
    return figures


def render(figures: dict[str, Any], args: argparse.Namespace) -> str:
    counts = args.step_counts
    names = {
        "ours": "ours (ToolCallAgent)",
        "ours_traced": "ours, traced (--trace)",
        "raw_sdk": "raw SDK (chat.completions.create)",
        "raw_http": "raw HTTP (plain JSON post)",
        "raw_http_stream": "raw HTTP, streamed (SSE)",
    }
    steps = figures["steps"]
    from bench.steps import reps_for

    longest = max(counts)
    runs = ", ".join(f"{reps_for(n, longest, args.reps)} at {n}" for n in counts)
    lines = ["", f"Per step, ms (median of {runs} runs; wall / CPU of the client process)"]
    header = f"{'':36}" + "".join(f"{f'{n} steps':>16}" for n in counts)
    lines.append(header)
    for loop, label in names.items():
        cells = "".join(
            f"{steps[f'{loop}@{n}']['wall_ms']:>9.2f} /{steps[f'{loop}@{n}']['cpu_ms']:>5.2f}"
            for n in counts
        )
        lines.append(f"{label:36}{cells}")

    def ratio(a: str, b: str, n: int) -> float:
        return steps[f"{a}@{n}"]["wall_ms"] / steps[f"{b}@{n}"]["wall_ms"]

    lines.append(
        f"{'ours / raw HTTP (wall)':36}"
        + "".join(f"{ratio('ours', 'raw_http', n):>15.2f}x" for n in counts)
    )
    lines.append(
        f"{'ours / raw HTTP streamed (wall)':36}"
        + "".join(f"{ratio('ours', 'raw_http_stream', n):>15.2f}x" for n in counts)
    )
    lines.append(
        f"{'traced / ours (wall)':36}"
        + "".join(f"{ratio('ours_traced', 'ours', n):>15.2f}x" for n in counts)
    )
    lines.append(
        f"{'raw SDK / ours (wall)':36}"
        + "".join(f"{ratio('raw_sdk', 'ours', n):>15.2f}x" for n in counts)
    )
    first, last = counts[0], counts[-1]

    def growth(loop: str) -> float:
        return steps[f"{loop}@{last}"]["wall_ms"] - steps[f"{loop}@{first}"]["wall_ms"]

    worst = max(ratio("ours", "raw_http", n) for n in counts)
    lines.append(
        f"Target: within {STEP_TARGET}x of raw HTTP at every length: worst {worst:.2f}x "
        f"-> {_mark(worst <= STEP_TARGET)}"
    )
    lines.append(
        f"Target: growth {first}->{last} steps no worse than raw HTTP: ours "
        f"{growth('ours'):+.2f} ms, raw HTTP {growth('raw_http'):+.2f} ms "
        f"-> {_mark(growth('ours') <= max(growth('raw_http'), 0.0) + 0.05)}"
    )

    lines += _render_cold(figures["cold"], counts)
    if "real_model" in figures:
        lines += ["", real_model.render_real_model(figures["real_model"])]

    startup = figures["startup_s"]
    heavy = figures["heavy_modules"]
    lines += ["", "Cold start, s (median, fresh interpreter)"]
    for label, seconds in startup.items():
        note = ""
        if label in heavy:
            loaded = ", ".join(heavy[label]) or "none"
            limit = 0.3 if "help" in label else 0.5
            note = f"  target < {limit} s -> {_mark(seconds < limit)}; heavy modules: {loaded}"
        lines.append(f"  {label:32}{seconds:>7.3f}{note}")

    rss = figures["rss_kb"]
    lines += ["", f"Peak RSS of a {last}-step run, MB (fresh process)"]
    for loop, label in names.items():
        if loop not in rss:
            continue
        mb = rss[loop] / 1024
        note = f"  target < 80 MB -> {_mark(mb < 80)}" if loop == "ours" else ""
        lines.append(f"  {label:34}{mb:>7.1f}{note}")

    swarm = figures["swarm"]
    lines += [
        "",
        f"{swarm['agents']} concurrent agents in one process (3 steps each, one shared LLM)",
        f"  finished {swarm['finished']}/{swarm['agents']} in {swarm['seconds']:.2f} s; "
        f"RSS {swarm['rss_before_kb'] / 1024:.1f} -> {swarm['peak_rss_kb'] / 1024:.1f} MB; "
        f"{swarm['kb_per_agent']:.1f} KB per agent  target < 100 KB -> "
        f"{_mark(swarm['kb_per_agent'] < 100 and swarm['finished'] == swarm['agents'])}",
    ]
    parallel = figures["parallel"]
    lines += [
        "",
        f"Parallel tool calls ({args.parallel_calls} read-only calls of 50 ms in one message)",
        f"  concurrent {parallel['concurrent']:.1f} calls/s, one at a time "
        f"{parallel['sequential']:.1f} calls/s "
        f"({parallel['concurrent'] / parallel['sequential']:.1f}x)",
    ]
    return "\n".join(lines)


def _render_cold(cold: dict[str, Any], counts: list[int]) -> list[str]:
    from bench.cold import WHOLE_PROCESS_STEPS

    lines: list[str] = []
    tables = (
        (
            "first_agent_run_ms_per_step",
            "First agent.run() in a fresh process, ms per step (the framework imported before; "
            "everything the run imports on the way counts, ours its HTTP client on the first "
            "request, raw when it creates it)",
            True,
        ),
        (
            "first_run_ms_per_step",
            "The same, from before the first import (importing the framework counts too)",
            False,
        ),
    )
    for key, title, targeted in tables:
        first = cold[key]
        lines += ["", title, f"{'':36}" + "".join(f"{f'{n} steps':>16}" for n in counts)]
        for loop, label in (("ours", "ours (ToolCallAgent)"), ("raw_http", "raw HTTP script")):
            lines.append(f"{label:36}" + "".join(f"{first[loop][str(n)]:>16.2f}" for n in counts))
        ratios = [first["ours"][str(n)] / first["raw_http"][str(n)] for n in counts]
        lines.append(f"{'ours / raw HTTP':36}" + "".join(f"{r:>15.2f}x" for r in ratios))
        if targeted:
            lines.append(
                f"Target: within {STEP_TARGET}x of raw HTTP at every length: worst "
                f"{max(ratios):.2f}x -> {_mark(max(ratios) <= STEP_TARGET)}"
            )
    process = cold["process_s"]
    samples = cold.get("process_samples", {})
    floor = process["raw_http"]
    counted = f"median of {samples['ours']} runs each" if "ours" in samples else "median"
    lines += [
        "",
        f"Whole process, start to exit, of a {WHOLE_PROCESS_STEPS}-step run, s ({counted})",
        f"  {'raw HTTP script':34}{floor:>7.3f}",
    ]
    ratio = process["ours"] / floor
    lines.append(
        f"  {'ours (ToolCallAgent script)':34}{process['ours']:>7.3f}  {ratio:.2f}x raw, "
        f"target <= {PROCESS_TARGET}x -> {_mark(ratio <= PROCESS_TARGET)}"
    )
    # Not the same loop (Manus: its tools, the terminal view, a session file): a reference.
    lines.append(
        f"  {'python main.py -p (Manus)':34}{process['main.py']:>7.3f}  "
        f"{process['main.py'] / floor:.2f}x raw (reference: a bigger agent than the loops)"
    )
    return lines


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    if args.web:
        from bench.web import render_web, run_web

        web_figures = run_web(sessions=10 if args.quick else 50)
        print(render_web(web_figures))
        if args.json:
            Path(args.json).write_text(json.dumps(web_figures, indent=2), encoding="utf-8")
        return 0
    if args.real_model:
        figures = real_model.run_from_args(args)
        print(real_model.render_real_model(figures))
        if args.json:
            Path(args.json).write_text(json.dumps(figures, indent=2), encoding="utf-8")
        return 0
    figures = run(args)
    print(render(figures, args))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
