"""Upstream's ``NormalPythonExecute`` (the data-analysis agent's ``python_execute``): ours is
the one :class:`~app.tool.python_execute.PythonExecute`, which already suits data work
(a real process per call, stdout and stderr, a timeout)."""

from app.tool.python_execute import PythonExecute

__all__ = ["NormalPythonExecute"]

NormalPythonExecute = PythonExecute
