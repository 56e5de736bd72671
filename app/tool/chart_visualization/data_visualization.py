"""Upstream's module path for ``DataVisualization`` (ours: :mod:`app.tool.chart.tools`)."""

from app.tool.chart.tools import DataVisualization

__all__ = ["DataVisualization"]
