"""Upstream compatibility: re-exports upstream's
``app.tool.chart_visualization.data_visualization`` from
:mod:`app.compat.tool.chart_visualization.data_visualization`."""

from app.compat.tool.chart_visualization.data_visualization import DataVisualization

__all__ = ["DataVisualization"]
