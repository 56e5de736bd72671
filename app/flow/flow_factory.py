"""Upstream compatibility: re-exports upstream's ``app.flow.flow_factory`` from
:mod:`app.compat.flow.flow_factory`."""

from app.compat.flow.flow_factory import FlowFactory, FlowType

__all__ = ["FlowFactory", "FlowType"]
