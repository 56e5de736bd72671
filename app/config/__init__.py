"""Configuration: the settings models (:mod:`.settings`), reading them from
``config/config.toml`` and ``mcp.json`` with the :data:`config` facade (:mod:`.loading`), and
errors that name the key as written (:mod:`.report`). Import every name from here."""

from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.config.loading import (
    CONFIG_ENV_VAR,
    PLACEHOLDER_API_KEYS,
    WORKSPACE_ENV_VAR,
    Config,
    config,
    find_config_path,
    get_project_root,
    load_config,
)
from app.config.settings import (
    DEFAULT_PROFILE,
    PROJECT_ROOT,
    AppConfig,
    BrowserSettings,
    CompactionSettings,
    DaytonaSettings,
    LimitsSettings,
    LLMSettings,
    MCPServerConfig,
    MCPSettings,
    ModelPrice,
    ProxySettings,
    RunflowSettings,
    SandboxSettings,
    SearchSettings,
    TracingSettings,
    WebSettings,
)

__all__ = [
    "CONFIG_ENV_VAR",
    "DEFAULT_PROFILE",
    "PLACEHOLDER_API_KEYS",
    "PROJECT_ROOT",
    "WORKSPACE_ENV_VAR",
    "WORKSPACE_ROOT",
    "AppConfig",
    "BrowserSettings",
    "CompactionSettings",
    "Config",
    "DaytonaSettings",
    "LLMSettings",
    "LimitsSettings",
    "MCPServerConfig",
    "MCPSettings",
    "ModelPrice",
    "ProxySettings",
    "RunflowSettings",
    "SandboxSettings",
    "SearchSettings",
    "TracingSettings",
    "WebSettings",
    "config",
    "find_config_path",
    "get_project_root",
    "load_config",
]

if TYPE_CHECKING:
    WORKSPACE_ROOT: Path


def __getattr__(name: str) -> Any:
    # Not a lazy import: upstream's constant WORKSPACE_ROOT must name the workspace
    # of the active config (file, $OPENMANUS_WORKSPACE), which a constant cannot.
    if name == "WORKSPACE_ROOT":
        return config.workspace_root
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
