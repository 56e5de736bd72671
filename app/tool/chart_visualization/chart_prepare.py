"""Upstream's module path for ``VisualizationPrepare`` (ours: :mod:`app.tool.chart.tools`)."""

from app.tool.chart.tools import VisualizationPrepare

__all__ = ["VisualizationPrepare"]
