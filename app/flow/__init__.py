"""Flows: several agents working through one task (``from app.flow import FlowFactory,
FlowType``)."""

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
