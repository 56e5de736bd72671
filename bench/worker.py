"""Measurements that need a process of their own: peak memory starts from a clean slate.

``python -m bench.worker rss LOOP STEPS URL`` runs one loop for STEPS steps and prints its
peak RSS; ``python -m bench.worker swarm AGENTS STEPS URL`` runs AGENTS agents at once and
prints the time and memory they took; ``python -m bench.worker steps COUNTS REPS URL`` prints
the median wall ms per step of ours and the raw-HTTP floor at each history length (for
``bench.compare``, which runs it in two trees). Each prints one JSON line.
"""

from __future__ import annotations

import asyncio
import gc
import json
import resource
import sys
import time
from typing import Any

__all__ = ["current_rss_kb", "main", "peak_rss_kb"]


def _status_kb(field: str) -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def peak_rss_kb() -> int:
    """This process's peak resident set size (VmHWM). Not ``ru_maxrss``: Linux carries that
    over ``exec`` from the forking parent, so a child would report the parent's size."""
    return _status_kb("VmHWM")


def current_rss_kb() -> int:
    return _status_kb("VmRSS")


def _raise_fd_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


async def _rss(loop: str, steps: int, url: str) -> dict[str, Any]:
    from bench.loops import API_KEY, bench_llm, bench_tools, run_ours, run_raw_http, run_raw_sdk

    tools = [tool.to_param() for tool in bench_tools()]
    if loop == "ours":
        llm = bench_llm(url)
        done = await run_ours(llm, steps)
        await llm.aclose()
    elif loop == "raw_sdk":
        import openai

        client = openai.AsyncOpenAI(api_key=API_KEY, base_url=url, max_retries=0)
        done = await run_raw_sdk(client, "echo", tools, steps)
        await client.close()
    else:
        from bench.raw import new_http_client

        async with new_http_client() as http:
            done = await run_raw_http(http, f"{url}/chat/completions", "echo", tools, steps)
    return {"loop": loop, "steps": done, "peak_rss_kb": peak_rss_kb()}


async def _swarm(agents: int, steps: int, url: str) -> dict[str, Any]:
    from bench.loops import bench_llm, run_ours

    llm = bench_llm(url, model=f"finish-{steps - 1}")
    await run_ours(llm, steps)  # warm-up: imports, client and pool exist before measuring
    gc.collect()
    before = current_rss_kb()
    start = time.perf_counter()
    done = await asyncio.gather(*(run_ours(llm, steps + 1) for _ in range(agents)))
    elapsed = time.perf_counter() - start
    peak = peak_rss_kb()
    await llm.aclose()
    finished = sum(1 for n in done if n == steps)
    return {
        "agents": agents,
        "finished": finished,
        "seconds": elapsed,
        "rss_before_kb": before,
        "peak_rss_kb": peak,
        "kb_per_agent": (peak - before) / agents,
    }


async def _steps(counts: list[int], reps: int, url: str) -> dict[str, Any]:
    from bench.steps import measure_steps

    loops = ("ours", "raw_http")
    figures = await measure_steps(url, counts, reps, loops)
    return {loop: {str(n): figures.wall[(loop, n)] for n in counts} for loop in loops}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    from app.logger import define_log_level

    define_log_level("ERROR", "OFF")
    _raise_fd_limit()
    if len(args) == 4 and args[0] == "rss":
        result = asyncio.run(_rss(args[1], int(args[2]), args[3]))
    elif len(args) == 4 and args[0] == "swarm":
        result = asyncio.run(_swarm(int(args[1]), int(args[2]), args[3]))
    elif len(args) == 4 and args[0] == "steps":
        counts = [int(n) for n in args[1].split(",")]
        result = asyncio.run(_steps(counts, int(args[2]), args[3]))
    else:
        print(
            "usage: python -m bench.worker rss LOOP STEPS URL | swarm AGENTS STEPS URL"
            " | steps COUNTS REPS URL",
            file=sys.stderr,
        )
        return 2
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
