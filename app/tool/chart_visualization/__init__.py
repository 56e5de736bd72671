"""Upstream compatibility: upstream's chart tools package; ours is :mod:`app.tool.chart`."""

from __future__ import annotations

from app.tool.chart.tools import DataVisualization, VisualizationPrepare
from app.tool.chart_visualization.python_execute import NormalPythonExecute

__all__ = ["DataVisualization", "NormalPythonExecute", "VisualizationPrepare"]
