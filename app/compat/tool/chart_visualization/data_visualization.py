"""Upstream compatibility: upstream's path of ``DataVisualization`` (ours: ``app.tool.chart``)."""

from app.tool.chart.tools import DataVisualization

__all__ = ["DataVisualization"]
