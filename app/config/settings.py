"""One pydantic model per TOML section, gathered in :class:`AppConfig`. No ``from __future__
import annotations``: pydantic creates these classes in half the time (measured 9.5 -> 4.7 ms)."""

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    field_validator,
    model_validator,
)

from app.config.report import suggest
from app.exceptions import ConfigError
from app.utils.sizes import parse_size

PROJECT_ROOT: Path = Path(__file__).resolve().parent.parent.parent
#: Name of the profile built from ``[llm]``'s own keys.
DEFAULT_PROFILE = "default"


class SettingsModel(BaseModel):
    """Unknown keys are reported by the loader, not pydantic; validators are built on first
    use (``defer_build``), so one ``LLMSettings`` built in code does not pay for the rest."""

    model_config = ConfigDict(extra="ignore", validate_assignment=True, defer_build=True)


def _blank_to_none(value: Any) -> Any:
    """Blank text (``""``, spaces) as None: TOML has no null, so an empty value means unset."""
    if isinstance(value, str) and not value.strip():
        return None
    return value


def _strip(value: Any) -> Any:
    return value.strip() if isinstance(value, str) else value


def _lower(value: Any) -> Any:
    return value.strip().lower() if isinstance(value, str) else value


def _api_type(value: Any) -> Any:
    return (_lower(value) or "openai") if value is None or isinstance(value, str) else value


def _check_base_url(value: str | None) -> str | None:
    # A URL without a scheme reached the HTTP client only to fail like a network outage,
    # retried for over half a minute.
    if value is not None and not value.lower().startswith(("http://", "https://")):
        raise ValueError(
            f"must be a full URL starting with http:// or https://, "
            f"got {value!r} (for example https://api.openai.com/v1)"
        )
    return value


def _check_size(value: str) -> str:
    parse_size(value)
    return value


#: Unset when blank; stripped when set.
_Text = Annotated[str | None, BeforeValidator(lambda v: _blank_to_none(_strip(v)))]
_Blank = BeforeValidator(_blank_to_none)
_Lower = BeforeValidator(_lower)


#: Keys that only some api_types use: set for another, they are a mistake worth saying.
_API_TYPE_KEYS = {
    "aws_region": ("aws",),
    "aws_profile": ("aws",),
    "thinking_budget": ("anthropic", "aws"),
}


class LLMSettings(SettingsModel):
    """One model profile: which endpoint to call and how patiently."""

    model: Annotated[str, BeforeValidator(_strip)] = Field(min_length=1)
    base_url: Annotated[_Text, AfterValidator(_check_base_url)] = None
    api_key: _Text = Field(default=None, repr=False)
    max_tokens: PositiveInt = 4096
    max_input_tokens: PositiveInt | None = None
    temperature: float = Field(default=1.0, ge=0.0, le=2.0)
    api_type: Annotated[str, BeforeValidator(_api_type)] = "openai"
    api_version: _Text = None
    timeout: PositiveFloat = 300.0
    max_retries: NonNegativeInt = 5
    retry_min_wait: NonNegativeFloat = 1.0
    retry_max_wait: NonNegativeFloat = 60.0
    supports_images: bool | None = None
    reasoning_model: bool | None = None
    #: ``true`` always, ``false`` never, ``"auto"`` when the text is watched or the endpoint
    #: is slow (see docs/configuration.md). Endpoints that refuse are asked without it.
    stream: bool | Literal["auto"] = "auto"
    #: Under ``stream = "auto"``, a turn this slow (seconds) streams the turns after it.
    stream_after: NonNegativeFloat = 2.0
    #: ``native`` (the API's ``tools``), ``text`` (prompted, parsed from the answer),
    #: ``constrained`` (the server made to answer with one valid JSON call) or ``auto``.
    tool_calling: Annotated[Literal["auto", "native", "text", "constrained"], _Lower] = "auto"
    #: Constrained tool calling: ``1`` asks for the whole call at once, ``2`` for the tool's
    #: name, then for its arguments (each request simpler: for very small models).
    constrained_steps: Literal[1, 2] = 1
    #: ``httpx`` (plain HTTP), ``openai`` (the SDK; always for Azure), or ``auto``.
    transport: Annotated[Literal["auto", "httpx", "openai"], _Lower] = "auto"
    #: Remember what an endpoint refused (streaming with tools, tools, images) across runs.
    capability_cache: bool = True
    #: Requests one LLM instance has in flight at once; more wait their turn.
    max_concurrent_requests: PositiveInt = 100
    #: Bedrock (``api_type = "aws"``): the region, when neither base_url's host nor the AWS
    #: chain (``AWS_REGION``, the profile) names it.
    aws_region: _Text = None
    #: Bedrock: a named profile of ``~/.aws/config`` to take credentials and region from.
    aws_profile: _Text = None
    #: Extended thinking (``"anthropic"``, and Claude on ``"aws"``): tokens the model may
    #: think before answering; unset: no thinking. At least 1024, below ``max_tokens``.
    thinking_budget: Annotated[int | None, Field(ge=1024)] = None
    #: Prompt caching (``"anthropic"``, ``"aws"``): cache breakpoints on the stable prefix.
    prompt_cache: bool = True

    @model_validator(mode="before")
    @classmethod
    def _bedrock_host(cls, data: Any) -> Any:
        # Upstream's Bedrock block names the endpoint by its host alone
        # ("bedrock-runtime.us-west-2.amazonaws.com"): it loads as written, as https.
        if not isinstance(data, Mapping) or _api_type(data.get("api_type")) != "aws":
            return data
        url = _blank_to_none(_strip(data.get("base_url")))
        if isinstance(url, str) and "://" not in url:
            return {**data, "base_url": f"https://{url}"}
        return data

    @model_validator(mode="after")
    def _check_consistency(self) -> Self:
        if self.api_type == "azure" and not self.api_version:
            raise ValueError(
                'api_type "azure" needs api_version (for example api_version = "2024-10-21")'
            )
        if self.api_type == "azure" and self.transport == "httpx":
            raise ValueError('api_type "azure" needs the openai SDK: use transport = "openai"')
        for key, kinds in _API_TYPE_KEYS.items():
            if getattr(self, key) is not None and self.api_type not in kinds:
                wanted = " or ".join(f'"{kind}"' for kind in kinds)
                raise ValueError(f"{key} applies to api_type {wanted}, not {self.api_type!r}")
        budget = self.thinking_budget
        if budget is not None and budget >= self.max_tokens:
            raise ValueError(
                f"thinking_budget ({budget}) must be below max_tokens ({self.max_tokens}): "
                "the thinking is part of the answer's tokens"
            )
        if self.retry_max_wait < self.retry_min_wait:
            raise ValueError(
                f"retry_max_wait ({self.retry_max_wait}) is smaller than retry_min_wait "
                f"({self.retry_min_wait})"
            )
        return self


class ModelPrice(SettingsModel):
    """What a model costs, in USD (or any currency) per million tokens."""

    input: NonNegativeFloat
    output: NonNegativeFloat
    #: Prompt tokens served from the provider's cache; unset means the ``input`` price.
    cached_input: NonNegativeFloat | None = None
    #: Prompt tokens written to the provider's cache (Anthropic, Bedrock: dearer than
    #: ``input``); unset means the ``input`` price.
    cache_write: NonNegativeFloat | None = None


class CompactionSettings(SettingsModel):
    """When and how an agent shrinks its conversation to fit the model's context window."""

    enabled: bool = True
    #: Compact when a request would use more than this share of the window...
    trigger: float = Field(default=0.85, gt=0.0, le=1.0)
    #: ...down to this share.
    target: float = Field(default=0.6, gt=0.0, le=1.0)
    #: Newest turns (a model answer with its tool results) always kept word for word.
    keep_recent_turns: PositiveInt = 3
    #: Older tool outputs and tool-call arguments longer than this many characters are shortened
    #: to a stub first.
    stub_chars: PositiveInt = 800
    #: Longest summary the model may write, in tokens.
    summary_max_tokens: PositiveInt = 1024

    @model_validator(mode="after")
    def _check_order(self) -> Self:
        if self.target > self.trigger:
            raise ValueError(f"target ({self.target}) must not exceed trigger ({self.trigger})")
        return self


class LimitsSettings(SettingsModel):
    """Caps on what one (untrusted) model reply may make the agent do or store."""

    #: Tool calls of one assistant reply that run; the others are answered "not run".
    max_tool_calls_per_reply: PositiveInt = 16
    #: Characters of a text a session file repeats (events, run records); kept whole once.
    max_stored_text_chars: PositiveInt = 20_000


class ProxySettings(SettingsModel):
    """Proxy the browser goes through."""

    server: str = Field(min_length=1)
    username: str | None = None
    password: str | None = Field(default=None, repr=False)


class BrowserSettings(SettingsModel):
    """How the browser tool starts or attaches to a browser; ``headless=None`` means auto."""

    headless: bool | None = None
    disable_security: bool = False
    extra_chromium_args: list[str] = []
    chrome_instance_path: Annotated[str | None, _Blank] = None
    wss_url: Annotated[str | None, _Blank] = None
    cdp_url: Annotated[str | None, _Blank] = None
    proxy: ProxySettings | None = None
    max_content_length: PositiveInt = 2000
    action_timeout: PositiveFloat = 30.0


class SearchSettings(SettingsModel):
    """Web search engine order and retry policy."""

    engine: str = "Google"
    fallback_engines: list[str] = ["DuckDuckGo", "Baidu", "Bing"]
    retry_delay: NonNegativeInt = 60
    max_retries: NonNegativeInt = 3
    lang: str = "en"
    country: str = "us"
    searxng_url: Annotated[str | None, _Blank] = None
    timeout: PositiveFloat = 10.0


class SandboxSettings(SettingsModel):
    """Where model-written code runs and within which limits (see ``app.sandbox``)."""

    use_sandbox: bool = False
    #: "local", "bubblewrap" or "docker"; unset: "docker" if use_sandbox else "local".
    backend: Annotated[
        Literal["local", "bubblewrap", "docker"] | None,
        BeforeValidator(lambda v: _blank_to_none(_lower(v))),
    ] = None
    image: str = "python:3.12-slim"
    work_dir: str = "/workspace"
    memory_limit: Annotated[str, AfterValidator(_check_size)] = "512m"
    cpu_limit: PositiveFloat = 1.0
    timeout: PositiveInt = 300
    network_enabled: bool = False
    max_processes: PositiveInt = 256

    @property
    def effective_backend(self) -> str:
        """The backend in force: ``backend`` if set, else upstream's meaning of use_sandbox."""
        return self.backend or ("docker" if self.use_sandbox else "local")


def _env_value(value: Any) -> Any:
    """Environment values are strings; JSON numbers and booleans are accepted as such."""
    if isinstance(value, bool):
        return str(value).lower()
    return str(value) if isinstance(value, int | float) else value


_HTTP_TYPE_ALIASES = {"http", "streamable-http", "streamable_http", "streamablehttp"}


class MCPServerConfig(SettingsModel):
    """One MCP server from ``mcp.json``: a command to spawn (stdio) or a URL (sse/http)."""

    type: Literal["stdio", "sse", "http"]
    command: str | None = None
    args: list[str] = []
    env: dict[str, Annotated[str, BeforeValidator(_env_value)]] | None = Field(
        default=None, repr=False
    )
    url: str | None = None
    headers: dict[str, str] = Field(default={}, repr=False)
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
            data["type"] = "http" if kind in _HTTP_TYPE_ALIASES else kind
        elif data.get("command"):
            data["type"] = "stdio"
        elif data.get("url"):
            data["type"] = "sse"
        else:
            data["type"] = "stdio"  # the "command" error below explains what is missing
        return data

    @model_validator(mode="after")
    def _check_target(self) -> Self:
        if self.type == "stdio" and not (self.command and self.command.strip()):
            raise ValueError('a "stdio" server needs "command" (and usually "args")')
        if self.type in {"sse", "http"} and not (self.url and self.url.strip()):
            raise ValueError(f'an "{self.type}" server needs "url"')
        return self


class MCPSettings(SettingsModel):
    """Our MCP server's module, the servers agents connect to, and caps on what they offer."""

    server_reference: str = "app.mcp.server"
    servers: dict[str, MCPServerConfig] = {}
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
    #: Characters of the plan shown in each step's prompt (a larger one is shown in part).
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
    allowed_hosts: list[str] = []


class TracingSettings(SettingsModel):
    """OpenTelemetry traces of runs (the ``otel`` extra; docs/tracing.md). Endpoint and service
    name fall back to ``OTEL_EXPORTER_OTLP_ENDPOINT`` and ``OTEL_SERVICE_NAME``."""

    enabled: bool = False
    #: OTLP/HTTP base URL (``/v1/traces`` is added); None: the variable, else localhost:4318.
    endpoint: str | None = None
    #: ``service.name`` of the spans; None: ``OTEL_SERVICE_NAME``, else "openmanus".
    service_name: str | None = None
    #: Record prompts, answers, tool arguments and results (secrets redacted); off: only sizes.
    record_content: bool = False
    #: Longest text recorded in one attribute when ``record_content`` is on.
    max_content_chars: PositiveInt = 4000
    #: Seconds one export may take, and the longest a program waits for spans at exit.
    export_timeout: PositiveFloat = 3.0
    #: Extra HTTP headers for the exporter (an API key of a hosted backend, for example).
    headers: dict[str, str] = Field(default={}, repr=False)


class DaytonaSettings(SettingsModel):
    """Upstream's ``[daytona]``, accepted so its files load; Daytona is unsupported here."""

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
    pricing: dict[str, ModelPrice] = {}
    compaction: CompactionSettings = Field(default_factory=CompactionSettings)
    limits: LimitsSettings = Field(default_factory=LimitsSettings)
    daytona_config: DaytonaSettings = Field(default_factory=DaytonaSettings)
    web: WebSettings = Field(default_factory=WebSettings)
    tracing: TracingSettings = Field(default_factory=TracingSettings)
    workspace_root: Path = PROJECT_ROOT / "workspace"
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
