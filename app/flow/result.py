"""What a flow hands back: the outcome of each step and the flow's report (progress while it
runs is on its event bus)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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
