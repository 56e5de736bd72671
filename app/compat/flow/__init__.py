"""Upstream compatibility: the modules of upstream's ``app.flow`` that are not ours."""

__all__: list[str] = []
