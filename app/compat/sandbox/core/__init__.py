"""Upstream compatibility: upstream's ``app.sandbox.core`` modules (its Docker sandbox, manager
and terminal) on :mod:`app.sandbox`."""

__all__: list[str] = []
