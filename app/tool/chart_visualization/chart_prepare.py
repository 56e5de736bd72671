"""Upstream compatibility: re-exports upstream's ``app.tool.chart_visualization.chart_prepare`` from
:mod:`app.compat.tool.chart_visualization.chart_prepare`."""

from app.compat.tool.chart_visualization.chart_prepare import VisualizationPrepare

__all__ = ["VisualizationPrepare"]
