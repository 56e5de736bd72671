"""What ``run()`` hands back: the upstream step log as a string, plus what a library needs."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.llm.usage import Usage
    from app.schema import AgentState

__all__ = ["RunResult"]


class RunResult(str):
    """The run's step log (``str(result)``, exactly upstream's text) with structured fields.

    Being a ``str`` keeps every upstream caller working; new code reads ``final_answer``,
    ``state``, ``steps``, ``usage`` and ``error`` instead of parsing the log.
    """

    final_answer: str | None
    state: AgentState
    steps: int
    step_results: list[str]
    usage: Usage
    error: BaseException | None

    def __new__(
        cls,
        log: str,
        *,
        final_answer: str | None,
        state: AgentState,
        steps: int,
        step_results: list[str],
        usage: Usage,
        error: BaseException | None = None,
    ) -> RunResult:
        obj = super().__new__(cls, log)
        obj.final_answer = final_answer
        obj.state = state
        obj.steps = steps
        obj.step_results = step_results
        obj.usage = usage
        obj.error = error
        return obj

    @property
    def ok(self) -> bool:
        """True when the run finished without error (not cut off by max_steps)."""
        return self.error is None and self.state.value == "FINISHED"

    def __repr__(self) -> str:
        answer = (self.final_answer or "")[:60]
        return (
            f"RunResult(state={self.state.value}, steps={self.steps}, "
            f"final_answer={answer!r}, error={self.error!r})"
        )
