"""Upstream compatibility: upstream's ``app.sandbox.core`` package; each of its modules
re-exports the module of the same name in :mod:`app.compat.sandbox.core`."""

__all__: list[str] = []
