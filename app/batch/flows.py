"""Tasks that run a flow (``"flow": "planning"``) around their agent; an unknown flow is
reported before the batch starts rather than as a failure of every such task."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from app.exceptions import ConfigError
from app.flow.base import FlowType
from app.flow.factory import FlowFactory
from app.flow.result import FlowResult

if TYPE_CHECKING:
    from app.agent.base import BaseAgent
    from app.session import SessionRecorder


def _flow_type(name: str) -> FlowType:
    for candidate in FlowType:
        if name.strip().lower() in {str(candidate.value).lower(), candidate.name.lower()}:
            return candidate
    known = ", ".join(str(t.value) for t in FlowType)
    raise ConfigError(f"unknown flow {name!r}; known flows: {known}")


def check_flow_name(name: str) -> None:
    """Raise ``ConfigError`` now if tasks name a flow that cannot run."""
    _flow_type(name)


async def run_flow(
    name: str,
    agent: BaseAgent,
    prompt: str,
    recorder: SessionRecorder | None = None,
    watch: Callable[[Any], None] | None = None,
) -> dict[str, Any]:
    """Run flow ``name`` with the task's agent as its executor.

    Returns the result fields: the flow's summary as the answer, FINISHED only when every plan
    step completed, else ERROR with what went wrong (blocked steps, timeout, LLM error)."""

    flow = FlowFactory.create_flow(_flow_type(name), agents={agent.name.lower(): agent})
    if recorder is not None:  # the task's session file (a SessionRecorder)
        recorder.attach_flow(flow)
    if watch is not None:  # traces of the flow (its plan steps and its agent's runs)
        watch(flow)
    result = await flow.execute(prompt)
    if not isinstance(result, FlowResult):  # a flow that reports text only
        return {"state": "FINISHED", "final_answer": str(result), "steps": 0}
    fields: dict[str, Any] = {
        "state": "FINISHED" if result.ok else "ERROR",
        "final_answer": result.summary or str(result),
        "steps": len(result.steps),
    }
    if result.error is not None:
        fields["error"] = f"{type(result.error).__name__}: {result.error}"
    elif result.timed_out:
        fields["error"] = "the flow ran out of time"
    elif not result.ok:
        statuses = result.plan.get("step_statuses", []) if result.plan else []
        blocked = [str(i) for i, status in enumerate(statuses) if status != "completed"]
        fields["error"] = f"plan steps not completed: {', '.join(blocked) or 'none planned'}"
    return fields
