"""What a flow reports while it runs (events for live progress) and what it hands back.

The listener interface is deliberately tiny, one callable per event, so a later general
event system can subscribe with a single adapter.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from app.logger import logger

__all__ = [
    "FlowEvent",
    "FlowEventKind",
    "FlowListener",
    "FlowResult",
    "StepOutcome",
    "notify",
]

FlowEventKind = Literal[
    "plan_created",  # the plan exists (plan_text shows it)
    "step_started",  # step_index/step/agent: an agent took the step
    "step_finished",  # status is "completed" or "blocked"; note says why/what
    "plan_updated",  # the plan was revised after a blocked step
    "summary",  # note holds the final summary
]


@dataclass(frozen=True)
class FlowEvent:
    """One thing that happened in a flow; ``plan_text`` is the plan as it stands afterwards."""

    kind: FlowEventKind
    plan_id: str
    plan_text: str
    step_index: int | None = None
    step: str | None = None
    agent: str | None = None
    status: str | None = None
    note: str | None = None
    total_steps: int = 0


#: A listener may be a plain function or a coroutine function.
FlowListener = Callable[[FlowEvent], Awaitable[None] | None]


async def notify(listeners: list[FlowListener], event: FlowEvent) -> None:
    """Give ``event`` to every listener; a failing listener is logged, never fatal."""
    for listener in listeners:
        try:
            outcome = listener(event)
            if inspect.isawaitable(outcome):
                await outcome
        except Exception as e:
            logger.warning(f"Flow listener {listener!r} failed on {event.kind}: {e}")


@dataclass
class StepOutcome:
    """How one attempt at a step ended."""

    index: int
    step: str
    agent: str
    status: str  # "completed" or "blocked"
    output: str = ""
    note: str = ""
    steps_used: int = 0

    @property
    def ok(self) -> bool:
        return self.status == "completed"


class FlowResult(str):
    """The flow's report as text (step results, then the summary, as upstream returned it),
    with the parts a program needs as fields."""

    summary: str
    plan_id: str
    plan: dict[str, Any]
    steps: list[StepOutcome]
    timed_out: bool
    error: BaseException | None

    def __new__(
        cls,
        text: str,
        *,
        summary: str,
        plan_id: str,
        plan: dict[str, Any],
        steps: list[StepOutcome] | None = None,
        timed_out: bool = False,
        error: BaseException | None = None,
    ) -> FlowResult:
        obj = super().__new__(cls, text)
        obj.summary = summary
        obj.plan_id = plan_id
        obj.plan = plan
        obj.steps = list(steps or [])
        obj.timed_out = timed_out
        obj.error = error
        return obj

    @property
    def ok(self) -> bool:
        """True when every step of the plan was completed, in time and without error."""
        statuses = self.plan.get("step_statuses", []) if self.plan else []
        return (
            self.error is None
            and not self.timed_out
            and bool(statuses)
            and all(status == "completed" for status in statuses)
        )

    def __repr__(self) -> str:
        return (
            f"FlowResult(plan_id={self.plan_id!r}, ok={self.ok}, timed_out={self.timed_out}, "
            f"steps={len(self.steps)}, error={self.error!r})"
        )
