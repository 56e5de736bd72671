"""Upstream compatibility: re-exports upstream's ``app.utils.logger`` from
:mod:`app.compat.utils.logger`."""

from app.compat.utils.logger import ENV_MODE, logger, renderer

__all__ = ["ENV_MODE", "logger", "renderer"]
