"""Upstream compatibility: the modules of upstream's ``app.agent`` that are not ours."""

__all__: list[str] = []
