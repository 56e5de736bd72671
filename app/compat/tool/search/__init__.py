"""Upstream compatibility: the modules of upstream's ``app.tool.search`` that are not ours."""

__all__: list[str] = []
