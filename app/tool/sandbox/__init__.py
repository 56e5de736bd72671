"""Upstream compatibility: upstream's ``app.tool.sandbox`` package; each of its modules
re-exports the module of the same name in :mod:`app.compat.tool.sandbox`."""

__all__: list[str] = []
