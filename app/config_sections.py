"""The configuration's other sections (browser, search, sandbox, MCP, run_flow, web,
daytona) and ``AppConfig``, the whole file: imported on first use (see :mod:`app.config_models`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    field_validator,
    model_validator,
)

from app.config_models import (
    DEFAULT_PROFILE,
    PROJECT_ROOT,
    CompactionSettings,
    LimitsSettings,
    LLMSettings,
    ModelPrice,
    SettingsModel,
    blank_to_none,
)
from app.config_report import suggest
from app.exceptions import ConfigError
from app.utils.sizes import parse_size

__all__ = [
    "AppConfig",
    "BrowserSettings",
    "DaytonaSettings",
    "MCPServerConfig",
    "MCPSettings",
    "ProxySettings",
    "RunflowSettings",
    "SandboxSettings",
    "SearchSettings",
    "WebSettings",
]


class ProxySettings(SettingsModel):
    """Proxy the browser goes through."""

    server: str = Field(min_length=1)
    username: str | None = None
    password: str | None = Field(default=None, repr=False)


class BrowserSettings(SettingsModel):
    """How the browser tool starts or attaches to a browser; ``headless=None`` means auto."""

    headless: bool | None = None
    disable_security: bool = False
    extra_chromium_args: list[str] = Field(default_factory=list)
    chrome_instance_path: str | None = None
    wss_url: str | None = None
    cdp_url: str | None = None
    proxy: ProxySettings | None = None
    max_content_length: PositiveInt = 2000
    action_timeout: PositiveFloat = 30.0

    @field_validator("chrome_instance_path", "wss_url", "cdp_url", mode="before")
    @classmethod
    def _blank(cls, value: Any) -> Any:
        return blank_to_none(value)


class SearchSettings(SettingsModel):
    """Web search engine order and retry policy."""

    engine: str = "Google"
    fallback_engines: list[str] = Field(default_factory=lambda: ["DuckDuckGo", "Baidu", "Bing"])
    retry_delay: NonNegativeInt = 60
    max_retries: NonNegativeInt = 3
    lang: str = "en"
    country: str = "us"
    searxng_url: str | None = None
    timeout: PositiveFloat = 10.0

    @field_validator("searxng_url", mode="before")
    @classmethod
    def _blank(cls, value: Any) -> Any:
        return blank_to_none(value)


class SandboxSettings(SettingsModel):
    """Where model-written code runs and within which limits (see ``app.sandbox``)."""

    use_sandbox: bool = False
    #: "local", "bubblewrap" or "docker"; unset: "docker" if use_sandbox else "local".
    backend: Literal["local", "bubblewrap", "docker"] | None = None
    image: str = "python:3.12-slim"
    work_dir: str = "/workspace"
    memory_limit: str = "512m"
    cpu_limit: PositiveFloat = 1.0
    timeout: PositiveInt = 300
    network_enabled: bool = False
    max_processes: PositiveInt = 256

    @field_validator("backend", mode="before")
    @classmethod
    def _normalise_backend(cls, value: Any) -> Any:
        value = blank_to_none(value)
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("memory_limit")
    @classmethod
    def _check_memory(cls, value: str) -> str:
        parse_size(value)
        return value

    @property
    def effective_backend(self) -> str:
        """The backend in force: ``backend`` if set, else upstream's meaning of use_sandbox."""
        return self.backend or ("docker" if self.use_sandbox else "local")


_HTTP_TYPE_ALIASES = {"http", "streamable-http", "streamable_http", "streamablehttp"}


class MCPServerConfig(SettingsModel):
    """One MCP server from ``mcp.json``: a command to spawn (stdio) or a URL (sse/http)."""

    type: Literal["stdio", "sse", "http"]
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] | None = Field(default=None, repr=False)
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict, repr=False)
    timeout: PositiveFloat | None = None  # seconds per tool call; None: the client's default
    #: Upper bound for one call however often the server reports progress (None: 10 × timeout).
    max_timeout: PositiveFloat | None = None
    #: Whether this server may have the agent's LLM answer its ``sampling/createMessage``.
    sampling: bool = False

    @model_validator(mode="before")
    @classmethod
    def _infer_type(cls, data: Any) -> Any:
        # Tolerant like upstream: the type may be omitted or spelled in several ways.
        if not isinstance(data, Mapping):
            return data
        data = dict(data)
        kind = data.get("type")
        if isinstance(kind, str) and kind.strip():
            kind = kind.strip().lower()
            if kind in _HTTP_TYPE_ALIASES:
                kind = "http"
            data["type"] = kind
        elif data.get("command"):
            data["type"] = "stdio"
        elif data.get("url"):
            data["type"] = "sse"
        else:
            data["type"] = "stdio"  # the "command" error below explains what is missing
        return data

    @field_validator("env", mode="before")
    @classmethod
    def _env_as_strings(cls, value: Any) -> Any:
        # Environment values are strings; accept JSON numbers/booleans for convenience.
        if isinstance(value, Mapping):
            return {
                k: (str(v).lower() if isinstance(v, bool) else str(v))
                if isinstance(v, int | float | bool)
                else v
                for k, v in value.items()
            }
        return value

    @model_validator(mode="after")
    def _check_target(self) -> MCPServerConfig:
        if self.type == "stdio" and not (self.command and self.command.strip()):
            raise ValueError('a "stdio" server needs "command" (and usually "args")')
        if self.type in {"sse", "http"} and not (self.url and self.url.strip()):
            raise ValueError(f'an "{self.type}" server needs "url"')
        return self


class MCPSettings(SettingsModel):
    """MCP: the module our own MCP server runs from, the servers agents connect to, and caps
    on what servers may put in front of the model (each request carries every tool offered)."""

    server_reference: str = "app.mcp.server"
    servers: dict[str, MCPServerConfig] = Field(default_factory=dict)
    #: Tools offered from all MCP servers together; the rest are left out (logged per server).
    max_tools: PositiveInt = 128
    #: Characters of one tool's description; longer ones are cut with a marker.
    max_description_chars: PositiveInt = 1024
    #: Characters of one tool's input schema (as JSON); a tool with a larger one is left out.
    max_schema_chars: PositiveInt = 16_384
    #: Seconds between two progress reports of one call that are passed on (the latest wins).
    progress_interval: NonNegativeFloat = 0.5


class RunflowSettings(SettingsModel):
    """Which agents the planning flow gets, and how large its plans may be."""

    use_data_analysis_agent: bool = False
    #: Steps one plan may have; the planning tool refuses larger plans with an error.
    max_plan_steps: PositiveInt = 100
    #: Characters of one step's text; the planning tool refuses longer steps.
    max_step_chars: PositiveInt = 1000
    #: Characters of the plan shown in each step's prompt; a larger plan is shown around
    #: the current step, the rest summed up in counts.
    max_plan_prompt_chars: PositiveInt = 8000


class WebSettings(SettingsModel):
    """The web UI (``python -m app.web``): where it listens and what it accepts."""

    #: Loopback by default; any other address also needs ``allow_remote`` (and the token).
    host: str = Field(default="127.0.0.1", min_length=1)
    port: int = Field(default=8765, ge=0, le=65535)
    #: Largest file the page may upload into a task's workspace, in MB.
    max_upload_mb: PositiveFloat = 20.0
    allow_remote: bool = False
    #: Extra host names the page may be reached by (remote use behind a DNS name).
    allowed_hosts: list[str] = Field(default_factory=list)


class DaytonaSettings(SettingsModel):
    """Upstream's ``[daytona]`` section, accepted so its config files load unchanged. Daytona
    cloud sandboxes are not supported here (see ``app.daytona``); nothing reads these."""

    daytona_api_key: str | None = Field(default=None, repr=False)
    daytona_server_url: str | None = "https://app.daytona.io/api"
    daytona_target: str | None = "us"
    sandbox_image_name: str | None = None
    sandbox_entrypoint: str | None = None
    VNC_password: str | None = Field(default=None, repr=False)


class AppConfig(BaseModel):
    """Everything loaded from the config files, already validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, defer_build=True)

    llm: dict[str, LLMSettings]
    browser_config: BrowserSettings = Field(default_factory=BrowserSettings)
    search_config: SearchSettings = Field(default_factory=SearchSettings)
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    mcp_config: MCPSettings = Field(default_factory=MCPSettings)
    run_flow_config: RunflowSettings = Field(default_factory=RunflowSettings)
    pricing: dict[str, ModelPrice] = Field(default_factory=dict)
    compaction: CompactionSettings = Field(default_factory=CompactionSettings)
    limits: LimitsSettings = Field(default_factory=LimitsSettings)
    daytona_config: DaytonaSettings = Field(default_factory=DaytonaSettings)
    web: WebSettings = Field(default_factory=WebSettings)
    workspace_root: Path = Field(default_factory=lambda: PROJECT_ROOT / "workspace")
    config_path: Path | None = None

    @field_validator("llm", mode="before")
    @classmethod
    def _single_profile(cls, value: Any) -> Any:
        # Convenience for code-built configs: one LLMSettings becomes the default profile.
        if isinstance(value, LLMSettings):
            return {DEFAULT_PROFILE: value}
        return value

    @field_validator("llm")
    @classmethod
    def _has_default(cls, value: dict[str, LLMSettings]) -> dict[str, LLMSettings]:
        if DEFAULT_PROFILE not in value:
            raise ValueError(f'llm needs a "{DEFAULT_PROFILE}" profile')
        return value

    def get_llm_settings(self, name: str | None = None) -> LLMSettings:
        """The named profile; unknown names are an error rather than a silent default."""
        key = name or DEFAULT_PROFILE
        try:
            return self.llm[key]
        except KeyError:
            known = ", ".join(sorted(self.llm))
            hint = suggest(key, self.llm)
            raise ConfigError(
                f"No LLM profile named {key!r}{hint}; configured profiles: {known}. "
                f"Add a [llm.{key}] table to the config file."
            ) from None
