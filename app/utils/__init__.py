"""Upstream's ``app.utils`` (helpers of its Daytona tools), kept importable."""

__all__: list[str] = []
