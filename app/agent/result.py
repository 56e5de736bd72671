"""What ``run()`` hands back: the upstream step log as a string, plus what a library needs."""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.llm.usage import Usage
    from app.schema import AgentState


class StopReason(str, Enum):
    """Why a run ended. Only ``COMPLETED`` is a success; the CLI turns the rest into exit 1."""

    COMPLETED = "completed"  # a special tool (terminate), an answer tool or a text answer
    MAX_STEPS = "max_steps"  # the step budget ran out
    STUCK = "stuck"  # the model kept repeating itself after the hints
    EMPTY_REPLIES = "empty_replies"  # the model kept answering with nothing
    TRUNCATED = "truncated"  # the answer kept being cut at max_tokens
    CONTEXT_OVERFLOW = "context_overflow"  # the request did not fit even after compaction
    ERROR = "error"  # the model could not be reached, or a step raised

    def __str__(self) -> str:
        return self.value


class RunResult(str):
    """The run's step log (``str(result)``, exactly upstream's text) with structured fields.

    Being a ``str`` keeps every upstream caller working; new code reads ``final_answer``,
    ``state``, ``steps``, ``usage``, ``error``, ``stop_reason`` and ``failure`` instead of
    parsing the log.
    """

    final_answer: str | None
    state: AgentState
    steps: int
    step_results: list[str]
    usage: Usage
    error: BaseException | None
    stop_reason: StopReason
    failure: str | None

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
        stop_reason: StopReason | None = None,
        failure: str | None = None,
    ) -> RunResult:
        obj = super().__new__(cls, log)
        obj.final_answer = final_answer
        obj.state = state
        obj.steps = steps
        obj.step_results = step_results
        obj.usage = usage
        obj.error = error
        if stop_reason is None:  # callers that predate stop reasons: infer it from the state
            stop_reason = (
                StopReason.ERROR
                if error is not None
                else StopReason.COMPLETED
                if state.value == "FINISHED"
                else StopReason.MAX_STEPS
            )
        obj.stop_reason = stop_reason
        if failure is None and stop_reason is not StopReason.COMPLETED:
            failure = str(error) if error is not None else _DEFAULT_FAILURE[stop_reason]
        obj.failure = failure
        return obj

    @property
    def ok(self) -> bool:
        """True when the run did its task (not cut off by max_steps, not failed)."""
        return (
            self.error is None
            and self.state.value == "FINISHED"
            and self.stop_reason is StopReason.COMPLETED
        )

    def __repr__(self) -> str:
        answer = (self.final_answer or "")[:60]
        return (
            f"RunResult(state={self.state.value}, steps={self.steps}, "
            f"stop_reason={self.stop_reason.value}, final_answer={answer!r}, "
            f"failure={self.failure!r})"
        )


_DEFAULT_FAILURE = {
    StopReason.MAX_STEPS: "the step budget ran out before the task was finished",
    StopReason.STUCK: "the model kept repeating the same action",
    StopReason.EMPTY_REPLIES: "the model returned empty replies",
    StopReason.TRUNCATED: "the answer was cut at max_tokens",
    StopReason.CONTEXT_OVERFLOW: "the request does not fit the model's context window",
    StopReason.ERROR: "the run failed",
}
