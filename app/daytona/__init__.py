"""Upstream's Daytona integration (cloud sandboxes with a VNC desktop), kept as importable
names only: OpenManus-py runs agent code in its own ``[sandbox]`` backends instead. Every use
raises :class:`~app.exceptions.UnsupportedFeatureError` naming what would be needed."""

__all__: list[str] = []
