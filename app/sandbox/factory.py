"""Build the sandbox the configuration asks for."""

from __future__ import annotations

import errno
import os
from typing import TYPE_CHECKING

from app.config import SandboxSettings, config
from app.exceptions import ConfigError

if TYPE_CHECKING:
    from app.sandbox.base import Sandbox

BACKENDS = ("local", "bubblewrap", "docker")


def current_settings() -> SandboxSettings:
    """``[sandbox]`` of the active config; defaults when there is no config file at all
    (tools must work without one), but a broken config file is still reported."""
    return config.section_or_default("sandbox")


def describe_start_error(exc: OSError) -> str:
    """What an ``OSError`` from ``Sandbox.start`` means, for the model (lower case)."""
    if exc.errno == errno.EAGAIN:  # tried a few times already (``Sandbox.start``)
        return f"the machine is out of processes for now ({exc}); try again in a moment"
    return f"the workspace directory is not usable: {exc}"


def create_sandbox(
    settings: SandboxSettings | None = None,
    workspace: str | os.PathLike[str] | None = None,
    *,
    backend: str | None = None,
) -> Sandbox:
    """A (not yet started) sandbox; ``settings`` None means the active config's ``[sandbox]``."""
    settings = settings if settings is not None else current_settings()
    name = (backend or settings.effective_backend).strip().lower()
    # A backend is imported when chosen, off the agent's import path (measured: bubblewrap and
    # docker about 50 ms each; local brings in the sandbox base, guard and launcher).
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
