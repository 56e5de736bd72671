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
from bench.steps import LOOPS, measure_steps

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
    proc = subprocess.Popen([sys.executable, "-m", "bench.server"], cwd=ROOT, env=_env(),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
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
    figures = await measure_steps(bench_server, [2, 3], reps=1)
    for loop in LOOPS:
        for steps in (2, 3):
            assert figures.wall[(loop, steps)] > 0
            assert figures.cpu[(loop, steps)] >= 0


async def test_parallel_figure(bench_server: str):
    figures = await measure_parallel(bench_server, calls=3, seconds=0.0, reps=1)
    assert figures["concurrent"] > 0 and figures["sequential"] > 0


@pytest.mark.parametrize("args", [["rss", "ours", "3"], ["rss", "raw_http", "3"],
                                  ["swarm", "5", "3"]])
def test_worker_measurements(bench_server: str, args: list[str]):
    out = subprocess.run([sys.executable, "-m", "bench.worker", *args, bench_server], cwd=ROOT,
                         env=_env(), capture_output=True, text=True, timeout=120)
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
