"""Upstream compatibility: the modules of upstream's ``app.tool`` that are not ours."""

__all__: list[str] = []
