"""Upstream compatibility: the modules of upstream's ``app.utils`` that are not ours."""

__all__: list[str] = []
