"""Upstream compatibility: upstream's ``app.sandbox.core`` paths, on :mod:`app.sandbox`."""

__all__: list[str] = []
