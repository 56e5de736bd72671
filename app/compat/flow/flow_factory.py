"""Upstream compatibility: upstream's path of the flow factory (``FlowFactory``, ``FlowType``);
the factory lives in :mod:`app.flow.factory`."""

from __future__ import annotations

from app.flow.base import FlowType
from app.flow.factory import FlowFactory

__all__ = ["FlowFactory", "FlowType"]
