"""Flows: several agents working through one task. Names load on first use, so importing
this package stays cheap (``from app.flow import FlowFactory, FlowType``)."""

from __future__ import annotations

from app._lazy import lazy_getattr

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
