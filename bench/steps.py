"""Per-step cost of each loop at several history lengths, all measured in one process.

Every loop gets a warm-up run (connection pool open, code paths imported), then the loops
take turns, repetition by repetition, so drift in the machine's load hits all of them alike.
Shorter histories get more repetitions (``reps_for``), so each median covers about as many
steps as the longest history's.
Wall and CPU time are per step; the model server runs in another process, so the CPU figure
is the loop's own work.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from bench.loops import (
    API_KEY,
    bench_llm,
    bench_tools,
    run_ours,
    run_raw_http,
    run_raw_http_stream,
    run_raw_sdk,
)

__all__ = ["LOOPS", "MAX_REPEAT_FACTOR", "RSS_LOOPS", "StepFigures", "measure_steps", "reps_for"]

LOOPS = ("ours", "ours_traced", "raw_sdk", "raw_http", "raw_http_stream")
#: The loops whose peak memory is measured (the streamed floor adds nothing there).
RSS_LOOPS = ("ours", "raw_sdk", "raw_http")


@dataclass
class StepFigures:
    """Median wall/CPU milliseconds per step, by loop and step count."""

    wall: dict[tuple[str, int], float] = field(default_factory=dict)
    cpu: dict[tuple[str, int], float] = field(default_factory=dict)
    samples: dict[tuple[str, int], list[float]] = field(default_factory=dict)


#: A short history is repeated at most this many times as often as the longest one.
MAX_REPEAT_FACTOR = 20


def reps_for(steps: int, longest: int, reps: int) -> int:
    """Repetitions for runs of ``steps`` steps: ``reps`` for the longest history, more for
    shorter ones (up to ``MAX_REPEAT_FACTOR`` times as many)."""
    return reps * max(1, min(MAX_REPEAT_FACTOR, longest // steps))


def traced_listener() -> Callable[[], Any]:
    """Fresh tracing listeners (``app.tracing``, the otel extra) on an SDK tracer provider
    whose batch processor hands the spans to an exporter that drops them: everything tracing
    costs the run, without a backend's own speed in the figure."""
    # The otel extra: only the traced loop needs it.
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )

    from app.config import TracingSettings
    from app.tracing import RunTracer

    class Dropped(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Dropped()))
    tracer, settings = provider.get_tracer("bench"), TracingSettings(enabled=True)
    return lambda: RunTracer(tracer, settings)


async def measure_steps(
    base_url: str, step_counts: list[int], reps: int, loops: tuple[str, ...] = LOOPS
) -> StepFigures:
    import openai

    from bench.raw import new_http_client

    llm = bench_llm(base_url)
    client = openai.AsyncOpenAI(api_key=API_KEY, base_url=base_url, max_retries=0)
    http = new_http_client()
    tools = [tool.to_param() for tool in bench_tools()]
    url = f"{base_url}/chat/completions"

    tracing = traced_listener() if "ours_traced" in loops else None
    runners: dict[str, Callable[[int], Awaitable[int]]] = {
        "ours": lambda n: run_ours(llm, n),
        "ours_traced": lambda n: run_ours(llm, n, listener=tracing() if tracing else None),
        "raw_sdk": lambda n: run_raw_sdk(client, "echo", tools, n),
        "raw_http": lambda n: run_raw_http(http, url, "echo", tools, n),
        "raw_http_stream": lambda n: run_raw_http_stream(http, url, "echo", tools, n),
    }
    figures = StepFigures()
    wall_samples: dict[tuple[str, int], list[float]] = {}
    cpu_samples: dict[tuple[str, int], list[float]] = {}
    longest = max(step_counts)
    # A 10-step run lasts a few milliseconds, where a scheduler hiccup moves one sample by a
    # third: shorter histories are repeated more, so every figure covers about as many steps.
    rounds = {steps: reps_for(steps, longest, reps) for steps in step_counts}
    try:
        for name in loops:  # warm-up
            await runners[name](5)
        for rep in range(max(rounds.values())):
            for steps in step_counts:
                if rep >= rounds[steps]:
                    continue
                for name in loops:
                    gc.collect()
                    wall0, cpu0 = time.perf_counter(), time.process_time()
                    done = await runners[name](steps)
                    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
                    if done != steps:
                        raise RuntimeError(f"{name} ran {done} of {steps} steps")
                    wall_samples.setdefault((name, steps), []).append(1000 * wall / steps)
                    cpu_samples.setdefault((name, steps), []).append(1000 * cpu / steps)
    finally:
        await http.aclose()
        await client.close()
        await llm.aclose()
    for key, values in wall_samples.items():
        figures.wall[key] = statistics.median(values)
        figures.cpu[key] = statistics.median(cpu_samples[key])
        figures.samples[key] = values
    return figures
