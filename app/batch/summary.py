"""The batch summary: counts, accuracy, tokens, cost, latency percentiles and throughput."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, Field

from app.batch.models import TaskResult


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (0-100) by linear interpolation; 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


class BatchSummary(BaseModel):
    """Over every result in the results file (earlier runs included)."""

    total: int
    done: int
    failed: int
    missing: int = 0
    states: dict[str, int] = Field(default_factory=dict)
    scored: int = 0
    correct: int = 0
    accuracy: float | None = None
    usage: dict[str, int] = Field(default_factory=dict)
    cost: float | None = None
    latency: dict[str, float] = Field(default_factory=dict)
    ran: int = 0  # tasks run in this invocation
    wall_time: float = 0.0  # of this invocation
    throughput: float | None = None  # tasks per second in this invocation

    def render(self) -> str:
        lines = [
            f"tasks: {self.total}  done: {self.done}  failed: {self.failed}"
            + (f"  not run: {self.missing}" if self.missing else ""),
            "states: " + ", ".join(f"{k} {v}" for k, v in sorted(self.states.items())),
        ]
        if self.accuracy is not None:
            lines.append(f"accuracy: {self.correct}/{self.scored} = {self.accuracy:.1%}")
        u = self.usage
        lines.append(
            f"tokens: {u.get('prompt_tokens', 0)} prompt + {u.get('completion_tokens', 0)} "
            f"completion = {u.get('total_tokens', 0)} in {u.get('requests', 0)} requests"
            + (f"  cost: ${self.cost:.4f}" if self.cost is not None else "")
        )
        if self.latency:
            lines.append(
                "latency (s): " + "  ".join(f"{k} {v:.2f}" for k, v in self.latency.items())
            )
        if self.throughput is not None:
            lines.append(
                f"this run: {self.ran} tasks in {self.wall_time:.1f} s = "
                f"{self.throughput:.2f} tasks/s"
            )
        return "\n".join(lines)


def summarize(
    results: Iterable[TaskResult],
    *,
    total: int | None = None,
    ran: int = 0,
    wall_time: float = 0.0,
) -> BatchSummary:
    items = list(results)
    usage: Counter[str] = Counter()
    costs = [r.cost for r in items if r.cost is not None]
    for r in items:
        usage.update(r.usage)
    scored = [r for r in items if r.correct is not None]
    correct = sum(1 for r in scored if r.correct)
    durations = [r.duration for r in items]
    latency: dict[str, Any] = {}
    if durations:
        latency = {f"p{q}": percentile(durations, q) for q in (50, 90, 95, 99)}
        latency["max"] = max(durations)
    done = sum(1 for r in items if r.ok)
    return BatchSummary(
        total=total if total is not None else len(items),
        done=done,
        failed=len(items) - done,
        missing=max(0, (total or len(items)) - len(items)),
        states=dict(Counter(r.state for r in items)),
        scored=len(scored),
        correct=correct,
        accuracy=correct / len(scored) if scored else None,
        usage=dict(usage),
        cost=round(sum(costs), 8) if costs else None,
        latency={k: round(v, 4) for k, v in latency.items()},
        ran=ran,
        wall_time=round(wall_time, 4),
        throughput=round(ran / wall_time, 4) if ran and wall_time > 0 else None,
    )
