"""Upstream's chart tools package; ours live in :mod:`app.tool.chart`. Names load on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app._lazy import lazy_getattr

if TYPE_CHECKING:
    from app.tool.chart.tools import DataVisualization, VisualizationPrepare
    from app.tool.chart_visualization.python_execute import NormalPythonExecute

__all__ = ["DataVisualization", "NormalPythonExecute", "VisualizationPrepare"]

__getattr__ = lazy_getattr(
    __name__,
    {
        "DataVisualization": "app.tool.chart.tools",
        "VisualizationPrepare": "app.tool.chart.tools",
        "NormalPythonExecute": "app.tool.chart_visualization.python_execute",
    },
)
