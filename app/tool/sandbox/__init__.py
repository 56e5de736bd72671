"""Upstream compatibility: upstream's Daytona sandbox tools (``sandbox_browser``, ``_files``,
``_shell``, ``_vision``): importable, but building one raises a clear "not supported" error. The
tools Manus uses here (``bash``, ``python_execute``, ``str_replace_editor``, ``browser_use``)
run in the ``[sandbox]`` backend instead."""

__all__: list[str] = []
