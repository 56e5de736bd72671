"""Upstream compatibility: re-exports upstream's ``app.daytona.tool_base`` from
:mod:`app.compat.daytona.tool_base`."""

from app.compat.daytona.tool_base import SandboxToolsBase, ThreadMessage, daytona, daytona_config
from app.compat.daytona.tool_base import __getattr__ as __getattr__  # daytona_settings: read on use

__all__ = [
    "SandboxToolsBase",
    "ThreadMessage",
    "daytona",
    "daytona_config",
    "daytona_settings",  # noqa: F822 (served by the __getattr__ imported above)
]
