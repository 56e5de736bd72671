"""Upstream's ``app.sandbox.core`` module paths, mapped onto :mod:`app.sandbox`."""

__all__: list[str] = []
