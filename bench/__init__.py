"""The performance suite: ``python -m bench`` (see docs/performance.md)."""

__all__: list[str] = []
