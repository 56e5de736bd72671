"""Upstream compatibility: re-exports upstream's ``app.tool.chart_visualization`` from
:mod:`app.compat.tool.chart_visualization`."""

from app.compat.tool.chart_visualization import (
    DataVisualization,
    NormalPythonExecute,
    VisualizationPrepare,
)

__all__ = ["DataVisualization", "NormalPythonExecute", "VisualizationPrepare"]
