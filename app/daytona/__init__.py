"""Upstream compatibility: re-exports upstream's ``app.daytona`` from :mod:`app.compat.daytona`."""

from app.compat.daytona import DAYTONA_MESSAGE, Unsupported, daytona_unsupported

__all__ = ["DAYTONA_MESSAGE", "Unsupported", "daytona_unsupported"]
