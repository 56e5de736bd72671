"""Flows: several agents working through one task. Names load on first use, so importing
this package stays cheap (``from app.flow import FlowFactory, FlowType``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app._lazy import lazy_getattr

if TYPE_CHECKING:
    from app.flow.base import BaseFlow, FlowType
    from app.flow.factory import FlowFactory
    from app.flow.planning import PlanningFlow
    from app.flow.result import FlowResult, StepOutcome

__all__ = [
    "BaseFlow",
    "FlowFactory",
    "FlowResult",
    "FlowType",
    "PlanningFlow",
    "StepOutcome",
]

_LOCATIONS = {
    "BaseFlow": "app.flow.base",
    "FlowFactory": "app.flow.factory",
    "FlowResult": "app.flow.result",
    "FlowType": "app.flow.base",
    "PlanningFlow": "app.flow.planning",
    "StepOutcome": "app.flow.result",
}


__getattr__ = lazy_getattr(__name__, _LOCATIONS)
