"""Tasks that run a flow (``"flow": "planning"``) around their agent.

The flow package is imported only when a task asks for one, and a missing or unknown flow is
reported before the batch starts rather than as a failure of every such task.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from app.exceptions import ConfigError

if TYPE_CHECKING:
    from app.agent.base import BaseAgent

__all__ = ["check_flow_name", "run_flow"]


def _flow_type(name: str) -> Any:
    try:
        from app.flow.factory import FlowType  # type: ignore[import-not-found]
    except ImportError as e:
        raise ConfigError(f"flow {name!r} is not available: {e}") from e
    for candidate in FlowType:
        if name.strip().lower() in {str(candidate.value).lower(), candidate.name.lower()}:
            return candidate
    known = ", ".join(str(t.value) for t in FlowType)
    raise ConfigError(f"unknown flow {name!r}; known flows: {known}")


def check_flow_name(name: str) -> None:
    """Raise ``ConfigError`` now if tasks name a flow that cannot run."""
    _flow_type(name)


async def run_flow(name: str, agent: BaseAgent, prompt: str) -> str:
    """Run flow ``name`` with the task's agent as its executor; returns the flow's answer."""
    from app.flow.factory import FlowFactory  # type: ignore[import-not-found]

    flow = FlowFactory.create_flow(_flow_type(name), agents={agent.name.lower(): agent})
    return str(await flow.execute(prompt))
