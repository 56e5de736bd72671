"""Upstream compatibility: ``app.daytona.sandbox``'s names; each use raises a clear error.
``daytona_settings`` is the config's ``[daytona]`` section, read on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from app.compat.daytona import Unsupported, daytona_unsupported
from app.config import config

__all__ = [
    "create_sandbox",
    "daytona",
    "daytona_config",
    "daytona_settings",
    "delete_sandbox",
    "get_or_start_sandbox",
    "start_supervisord_session",
]

daytona = Unsupported("The Daytona client")
daytona_config = Unsupported("The Daytona client config")


if TYPE_CHECKING:
    from app.config import DaytonaSettings

    daytona_settings: DaytonaSettings  # read through __getattr__ below


def __getattr__(name: str) -> Any:
    if name == "daytona_settings":
        return config.section_or_default("daytona_config")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


async def get_or_start_sandbox(sandbox_id: str) -> Any:
    raise daytona_unsupported("get_or_start_sandbox")


def start_supervisord_session(sandbox: Any) -> None:
    raise daytona_unsupported("start_supervisord_session")


def create_sandbox(password: str, project_id: str | None = None) -> Any:
    raise daytona_unsupported("create_sandbox")


async def delete_sandbox(sandbox_id: str) -> bool:
    raise daytona_unsupported("delete_sandbox")
