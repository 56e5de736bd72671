"""The performance suite: ``python -m bench`` (see README, *Performance*)."""

__all__: list[str] = []
