"""Upstream compatibility: upstream's path of ``VisualizationPrepare`` (ours: ``tool.chart``)."""

from app.tool.chart.tools import VisualizationPrepare

__all__ = ["VisualizationPrepare"]
