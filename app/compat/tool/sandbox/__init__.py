"""Upstream compatibility: upstream's Daytona sandbox tools, importable; building one raises."""

__all__: list[str] = []
