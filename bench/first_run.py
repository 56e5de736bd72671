"""One run in a fresh interpreter, timed from before its first import to the end of the run.

``python -m bench.first_run LOOP URL MODEL STEPS WORKLOAD`` runs ``ours`` (a ToolCallAgent, so
``app`` and whatever the first request pulls in are imported on the clock) or ``raw_http``
(``bench.raw``: json and a plain HTTP client, nothing from ``app``) for STEPS steps, and prints
one JSON line: the steps, the seconds from before the first import to the end of the run, and
``run_seconds``: the run itself, from creating the LLM (ours) or the HTTP client (raw) to its
end, with every import the run makes on the way (ours imports its HTTP client on the first
request, raw when it creates it); the framework itself is imported before.
WORKLOAD is a JSON file of ``bench.loops.workload()`` (the raw loop cannot import ``app``).
The parent times the whole process, start to exit, around this.
"""

from __future__ import annotations

import time

_T0 = time.perf_counter()  # before anything of the run is imported

import asyncio  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
from typing import Any  # noqa: E402

__all__ = ["main"]


async def _ours(url: str, model: str, steps: int) -> tuple[int, float]:
    from bench.loops import bench_llm, run_ours

    start = time.perf_counter()
    llm = bench_llm(url, model=model)
    try:
        done = await run_ours(llm, steps)
        return done, time.perf_counter() - start
    finally:
        await llm.aclose()


async def _raw(url: str, model: str, steps: int, workload: dict[str, Any]) -> tuple[int, float]:
    from bench.raw import new_http_client, run_raw_http

    start = time.perf_counter()
    async with new_http_client() as http:
        done = await run_raw_http(http, f"{url}/chat/completions", model, workload, steps)
        return done, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 5 or args[0] not in ("ours", "raw_http"):
        print(
            "usage: python -m bench.first_run ours|raw_http URL MODEL STEPS WORKLOAD",
            file=sys.stderr,
        )
        return 2
    loop, url, model, steps, path = args[0], args[1], args[2], int(args[3]), args[4]
    if loop == "ours":
        from app.logger import define_log_level

        define_log_level("ERROR", "OFF")
        done, run = asyncio.run(_ours(url, model, steps))
    else:
        with open(path, encoding="utf-8") as f:
            workload = json.load(f)
        done, run = asyncio.run(_raw(url, model, steps, workload))
    seconds = time.perf_counter() - _T0
    print(json.dumps({"loop": loop, "steps": done, "seconds": seconds, "run_seconds": run}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
