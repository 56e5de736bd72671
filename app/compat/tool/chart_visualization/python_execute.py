"""Upstream compatibility: upstream's ``NormalPythonExecute`` (the data-analysis agent's
``python_execute``) is our :class:`~app.tool.python_execute.PythonExecute`, which suits data work
(a real process per call, stdout and stderr, a timeout)."""

from app.tool.python_execute import PythonExecute

__all__ = ["NormalPythonExecute"]

NormalPythonExecute = PythonExecute
