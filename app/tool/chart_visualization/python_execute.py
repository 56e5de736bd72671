"""Upstream compatibility: re-exports upstream's
``app.tool.chart_visualization.python_execute`` from
:mod:`app.compat.tool.chart_visualization.python_execute`."""

from app.compat.tool.chart_visualization.python_execute import NormalPythonExecute

__all__ = ["NormalPythonExecute"]
