"""The benchmark suite keeps working: its server answers each scenario, and every measurement
runs end to end on a tiny scale. Nothing here checks speed (benchmarks print figures)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.testing.netguard import SITE_DIR
from bench.parallel import measure_parallel
from bench.server import respond
from bench.steps import LOOPS, MAX_REPEAT_FACTOR, measure_steps, reps_for

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent


class _Req:
    def __init__(self, model: str, tool_results: int) -> None:
        self.model = model
        self.messages = [{"role": "tool"}] * tool_results


def _names(reply: Any) -> list[str]:
    return [c.name for c in reply.calls]


def test_server_answers_by_scenario():
    assert _names(respond(_Req("echo", 50))) == ["echo"]
    assert _names(respond(_Req("finish-2", 1))) == ["echo"]
    assert _names(respond(_Req("finish-2", 2))) == ["terminate"]
    assert _names(respond(_Req("parallel-3", 0))) == ["wait"] * 3
    assert _names(respond(_Req("parallel-3", 3))) == ["terminate"]
    with pytest.raises(ValueError, match="unknown scenario"):
        respond(_Req("nonsense-1", 0))


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([SITE_DIR, str(ROOT)])
    env["OPENMANUS_BLOCK_NETWORK"] = "1"
    return env


@pytest.fixture
def bench_server() -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.server"],
        cwd=ROOT,
        env=_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            assert proc.wait(timeout=30) == 0  # the server saw no errors
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


async def test_step_figures_for_every_loop(bench_server: str):
    figures = await measure_steps(bench_server, [2, 4], reps=1)
    for loop in LOOPS:
        for steps in (2, 4):
            assert figures.wall[(loop, steps)] > 0
            assert figures.cpu[(loop, steps)] >= 0
        # The shorter history is repeated more: both figures cover as many steps.
        assert len(figures.samples[(loop, 2)]) == 2
        assert len(figures.samples[(loop, 4)]) == 1


def test_shorter_histories_get_more_repetitions():
    assert reps_for(200, 200, 5) == 5
    assert reps_for(50, 200, 5) == 20
    assert reps_for(10, 200, 5) == 100
    assert reps_for(1, 1000, 2) == 2 * MAX_REPEAT_FACTOR  # capped


async def test_parallel_figure(bench_server: str):
    figures = await measure_parallel(bench_server, calls=3, seconds=0.0, reps=1)
    assert figures["concurrent"] > 0 and figures["sequential"] > 0


@pytest.mark.parametrize(
    "args", [["rss", "ours", "3"], ["rss", "raw_http", "3"], ["swarm", "5", "3"]]
)
def test_worker_measurements(bench_server: str, args: list[str]):
    out = subprocess.run(
        [sys.executable, "-m", "bench.worker", *args, bench_server],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if args[0] == "rss":
        assert result["steps"] == 3 and result["peak_rss_kb"] > 0
    else:
        assert result["finished"] == 5 and result["peak_rss_kb"] >= result["rss_before_kb"]


async def test_scripted_server_can_keep_only_recent_requests(make_llm):
    from app.testing import ScriptedLLMServer, text

    with ScriptedLLMServer([text(str(i)) for i in range(5)], keep_requests=2) as server:
        llm = make_llm(base_url=server.base_url)
        for i in range(5):
            assert await llm.ask([{"role": "user", "content": f"q{i}"}], stream=False) == str(i)
        assert server.wait_for_requests(5, timeout=1.0)
        assert [r.index for r in server.requests] == [3, 4]
        assert server.requests[-1].messages[-1]["content"] == "q4"
        await llm.aclose()


def test_first_runs_and_whole_processes(bench_server: str):
    """Fresh processes for both loops at each length, plus ``main.py -p`` to its 10th step."""
    from bench.cold import COLD_LOOPS, WHOLE_PROCESS_STEPS, measure_cold

    figures = measure_cold(bench_server, [2], reps=1, process_samples=2)
    for loop in COLD_LOOPS:
        for steps in (2, WHOLE_PROCESS_STEPS):
            with_imports = figures["first_run_ms_per_step"][loop][str(steps)]
            run_only = figures["first_agent_run_ms_per_step"][loop][str(steps)]
            # The run alone is part of the span from the first import to the run's end.
            assert 0 < run_only <= with_imports
    process = figures["process_s"]
    assert set(process) == {"ours", "raw_http", "main.py"}
    # The whole-process figures of the two loops take their own count of samples.
    assert figures["process_samples"] == {"ours": 2, "raw_http": 2, "main.py": 1}
    # A whole process includes its run: never less than the run itself.
    for loop in COLD_LOOPS:
        run_s = figures["first_run_ms_per_step"][loop][str(WHOLE_PROCESS_STEPS)] / 1000
        assert process[loop] >= run_s * WHOLE_PROCESS_STEPS


def test_raw_loop_imports_nothing_from_app(bench_server: str, tmp_path: Path):
    """The floor must not pay for our imports, or the comparison flatters us."""
    from bench.loops import workload

    path = tmp_path / "workload.json"
    path.write_text(json.dumps(workload()))
    code = (
        "import runpy, sys\n"
        f"sys.argv = ['first_run', 'raw_http', {bench_server!r}, 'echo', '3', {str(path)!r}]\n"
        "try:\n    runpy.run_module('bench.first_run', run_name='__main__')\n"
        "except SystemExit as e:\n    assert not e.code, e.code\n"
        "print(sorted(m for m in sys.modules if m == 'app' or m.startswith('app.')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    first, loaded = out.stdout.strip().splitlines()[-2:]
    assert json.loads(first)["steps"] == 3
    assert loaded == "[]"


async def test_real_model_figures_add_up(bench_server: str):
    from bench.real_model import measure_real_model, render_real_model

    figures = await measure_real_model(bench_server, "finish-2", steps=5)
    assert figures["steps"] == 3 and figures["requests"] == 3
    assert [row["step"] for row in figures["per_step"]] == [1, 2, 3]
    assert sum(row["wall_s"] for row in figures["per_step"]) <= figures["total_s"]
    # The LLM reports every attempt through app.llm.context.request_timer.
    assert figures["timed_requests"] == 3
    assert 0 < figures["model_s"] <= figures["total_s"]
    total = figures["model_s"] + figures["tools_s"] + figures["framework_s"]
    assert abs(total - figures["total_s"]) < 1e-6
    assert "finish-2" in render_real_model(figures)


def test_quick_suite_prints_every_section():
    out = subprocess.run(
        [sys.executable, "-m", "bench", "--quick"],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    for heading in (
        "Per step, ms",
        "First agent.run() in a fresh process",
        "from before the first import",
        "Whole process, start to exit",
        "Real model: finish-2",
        "Cold start",
        "Peak RSS",
        "concurrent agents",
        "Parallel tool calls",
    ):
        assert heading in out.stdout, heading
    assert out.stdout.count("-> met") + out.stdout.count("-> NOT MET") >= 7


def test_real_model_needs_a_server_url():
    out = subprocess.run(
        [sys.executable, "-m", "bench", "--real-model"],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2 and "--base-url" in out.stderr
