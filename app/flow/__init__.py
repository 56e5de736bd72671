"""Flows: several agents working through one task. Names load on first use, so importing
this package stays cheap (``from app.flow import FlowFactory, FlowType``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app._lazy import lazy_getattr

if TYPE_CHECKING:
    from app.flow.base import BaseFlow, FlowType
    from app.flow.events import FlowEvent, FlowResult, StepOutcome
    from app.flow.factory import FlowFactory
    from app.flow.planning import PlanningFlow

__all__ = [
    "BaseFlow",
    "FlowEvent",
    "FlowFactory",
    "FlowResult",
    "FlowType",
    "PlanningFlow",
    "StepOutcome",
]

_LOCATIONS = {
    "BaseFlow": "app.flow.base",
    "FlowEvent": "app.flow.events",
    "FlowFactory": "app.flow.factory",
    "FlowResult": "app.flow.events",
    "FlowType": "app.flow.base",
    "PlanningFlow": "app.flow.planning",
    "StepOutcome": "app.flow.events",
}


__getattr__ = lazy_getattr(__name__, _LOCATIONS)
