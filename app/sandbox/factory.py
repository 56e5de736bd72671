"""Build the sandbox the configuration asks for."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from app.config_sections import SandboxSettings
from app.exceptions import ConfigError

if TYPE_CHECKING:
    from app.sandbox.base import Sandbox

__all__ = ["BACKENDS", "create_sandbox", "current_settings"]

BACKENDS = ("local", "bubblewrap", "docker")


def current_settings() -> SandboxSettings:
    """``[sandbox]`` of the active config; defaults when there is no config file at all
    (tools must work without one), but a broken config file is still reported."""
    from app.config import config

    return config.section_or_default("sandbox")


def create_sandbox(
    settings: SandboxSettings | None = None,
    workspace: str | os.PathLike[str] | None = None,
    *,
    backend: str | None = None,
) -> Sandbox:
    """A (not yet started) sandbox; ``settings`` None means the active config's ``[sandbox]``."""
    settings = settings if settings is not None else current_settings()
    name = (backend or settings.effective_backend).strip().lower()
    if name == "local":
        from app.sandbox.local import LocalSandbox

        return LocalSandbox(settings, workspace)
    if name == "bubblewrap":
        from app.sandbox.bubblewrap import BubblewrapSandbox

        return BubblewrapSandbox(settings, workspace)
    if name == "docker":
        from app.sandbox.docker import DockerSandbox

        return DockerSandbox(settings, workspace)
    raise ConfigError(
        f"[sandbox] backend: unknown backend {name!r}; use one of {', '.join(BACKENDS)}"
    )
