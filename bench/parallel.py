"""Throughput of one assistant message asking for several read-only tool calls at once."""

from __future__ import annotations

import statistics
import time

from bench.loops import Wait, bench_llm, run_ours

__all__ = ["measure_parallel"]


async def measure_parallel(
    base_url: str, calls: int, seconds: float, reps: int
) -> dict[str, float]:
    """Calls per second with ``calls`` concurrent-safe calls of ``seconds`` each in one
    message, run concurrently (the default) and one at a time (``concurrent_tool_calls=False``).
    """
    from app.agent.toolcall import ToolCallAgent
    from app.schema import Memory
    from app.tool.terminate import Terminate
    from app.tool.tool_collection import ToolCollection

    llm = bench_llm(base_url, model=f"parallel-{calls}")
    figures: dict[str, list[float]] = {"concurrent": [], "sequential": []}
    try:
        await run_ours(llm, 2, [Wait(seconds=0.0), Terminate()])  # warm-up
        for _ in range(reps):
            for mode in figures:
                agent = ToolCallAgent(
                    llm=llm,
                    available_tools=ToolCollection(Wait(seconds=seconds), Terminate()),
                    max_steps=3,
                    memory=Memory(max_messages=100),
                    concurrent_tool_calls=mode == "concurrent",
                )
                start = time.perf_counter()
                result = await agent.run("Wait for every label.")
                elapsed = time.perf_counter() - start
                if result.steps != 2:
                    raise RuntimeError(f"parallel run took {result.steps} steps, expected 2")
                figures[mode].append(calls / elapsed)
    finally:
        await llm.aclose()
    return {mode: statistics.median(values) for mode, values in figures.items()}
