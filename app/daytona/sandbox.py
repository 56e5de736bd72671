"""Upstream compatibility: re-exports upstream's ``app.daytona.sandbox`` from
:mod:`app.compat.daytona.sandbox`."""

from app.compat.daytona.sandbox import __getattr__ as __getattr__  # daytona_settings: read on use
from app.compat.daytona.sandbox import (
    create_sandbox,
    daytona,
    daytona_config,
    delete_sandbox,
    get_or_start_sandbox,
    start_supervisord_session,
)

__all__ = [
    "create_sandbox",
    "daytona",
    "daytona_config",
    "daytona_settings",  # noqa: F822 (served by the __getattr__ imported above)
    "delete_sandbox",
    "get_or_start_sandbox",
    "start_supervisord_session",
]
