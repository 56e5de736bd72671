"""Upstream compatibility: the modules of upstream's ``app.sandbox`` that are not ours."""

__all__: list[str] = []
