"""Upstream compatibility: upstream's second logger (structlog, for its Daytona code) is the
one logger of :mod:`app.logger`, so everything logs the same way with secrets redacted."""

from __future__ import annotations

import os
from typing import Any

from app.logger import logger

__all__ = ["ENV_MODE", "logger", "renderer"]

#: Upstream's deployment mode switch (LOCAL prints readable lines, else JSON); informational.
ENV_MODE = os.getenv("ENV_MODE", "LOCAL")
#: Upstream's structlog renderer chain; unused (loguru formats our lines).
renderer: list[Any] = []
