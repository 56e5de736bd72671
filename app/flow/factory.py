"""``FlowFactory``: build a flow by its type (upstream's entry point for flows)."""

from __future__ import annotations

from typing import Any

from app.agent.base import BaseAgent
from app.flow.base import BaseFlow, FlowType
from app.flow.planning import PlanningFlow

_FLOWS: dict[FlowType, type[BaseFlow]] = {FlowType.PLANNING: PlanningFlow}


class FlowFactory:
    @staticmethod
    def create_flow(
        flow_type: FlowType | str,
        agents: BaseAgent | list[BaseAgent] | dict[str, BaseAgent],
        **kwargs: Any,
    ) -> BaseFlow:
        """A flow of ``flow_type`` (a ``FlowType`` or its value, e.g. ``"planning"``)."""
        try:
            kind = FlowType(flow_type)
        except ValueError:
            known = ", ".join(t.value for t in FlowType)
            raise ValueError(f"Unknown flow type {flow_type!r}; known types: {known}") from None
        return _FLOWS[kind](agents, **kwargs)
