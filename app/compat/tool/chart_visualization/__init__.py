"""Upstream compatibility: upstream's chart tools package; ours is :mod:`app.tool.chart`."""

from __future__ import annotations

from app.compat.tool.chart_visualization.python_execute import NormalPythonExecute
from app.tool.chart.tools import DataVisualization, VisualizationPrepare

__all__ = ["DataVisualization", "NormalPythonExecute", "VisualizationPrepare"]
