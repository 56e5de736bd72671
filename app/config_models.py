"""The validated shape of the configuration: one pydantic model per TOML section.

The models an agent needs to talk to a model (``LLMSettings``, ``ModelPrice``,
``CompactionSettings``) are defined here; the other sections and ``AppConfig`` are in
:mod:`app.config_sections`, imported on first use (a program that builds one ``LLMSettings``
in code never creates the browser, sandbox, MCP... classes). Every name stays importable from
here.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

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

from app._lazy import lazy_getattr

if TYPE_CHECKING:
    from app.config_sections import (
        AppConfig,
        BrowserSettings,
        DaytonaSettings,
        MCPServerConfig,
        MCPSettings,
        ProxySettings,
        RunflowSettings,
        SandboxSettings,
        SearchSettings,
        WebSettings,
    )

__all__ = [
    "DEFAULT_PROFILE",
    "PROJECT_ROOT",
    "AppConfig",
    "BrowserSettings",
    "CompactionSettings",
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
    "SettingsModel",
    "WebSettings",
    "blank_to_none",
]

PROJECT_ROOT: Path = Path(__file__).resolve().parent.parent
#: Name of the profile built from ``[llm]``'s own keys.
DEFAULT_PROFILE = "default"


class SettingsModel(BaseModel):
    """Common model behaviour: unknown keys are reported by the loader, not by pydantic.

    Validators are built on first use (``defer_build``), not at import: a program that
    builds one ``LLMSettings`` in code does not pay for the browser, sandbox, MCP... models.
    """

    model_config = ConfigDict(extra="ignore", validate_assignment=True, defer_build=True)


def blank_to_none(value: Any) -> Any:
    """Blank text (``""``, spaces) as None: TOML has no null, so an empty value means unset."""
    if isinstance(value, str) and not value.strip():
        return None
    return value


class LLMSettings(SettingsModel):
    """One model profile: which endpoint to call and how patiently."""

    model: str = Field(min_length=1)
    base_url: str | None = None
    api_key: str | None = Field(default=None, repr=False)
    max_tokens: PositiveInt = 4096
    max_input_tokens: PositiveInt | None = None
    temperature: float = Field(default=1.0, ge=0.0, le=2.0)
    api_type: str = "openai"
    api_version: str | None = None
    timeout: PositiveFloat = 300.0
    max_retries: NonNegativeInt = 5
    retry_min_wait: NonNegativeFloat = 1.0
    retry_max_wait: NonNegativeFloat = 60.0
    supports_images: bool | None = None
    reasoning_model: bool | None = None
    #: Stream turns: ``true`` always (``timeout`` then bounds the silence between chunks, and
    #: a server stops generating an abandoned answer), ``false`` never, ``"auto"`` when the
    #: text is watched (terminal, web UI) or the endpoint is slow (the first turn, and after
    #: a turn of ``stream_after`` seconds or more). Endpoints that refuse are asked without it.
    stream: bool | Literal["auto"] = "auto"
    #: Under ``stream = "auto"``, a turn that took this many seconds marks the endpoint slow:
    #: the turns after it are streamed until one is quicker.
    stream_after: NonNegativeFloat = 2.0
    #: How tools reach the model: ``native`` (the API's ``tools``), ``text`` (described in the
    #: system prompt, calls parsed from the answer) or ``auto`` (native, text once refused).
    tool_calling: Literal["auto", "native", "text"] = "auto"
    #: ``httpx`` (plain HTTP, the default), ``openai`` (the SDK; always used for Azure), or
    #: ``auto``.
    transport: Literal["auto", "httpx", "openai"] = "auto"
    #: Remember what an endpoint refused (streaming with tools, tools, images) across runs,
    #: in ``$OPENMANUS_CACHE_DIR`` or ``~/.cache/openmanus/endpoints.json``.
    capability_cache: bool = True
    #: Requests one LLM instance has in flight at once; more wait their turn (many agents
    #: sharing one LLM then share a bounded connection pool instead of opening one each).
    max_concurrent_requests: PositiveInt = 100

    @field_validator("model", mode="before")
    @classmethod
    def _strip_model(cls, value: Any) -> Any:
        return value.strip() if isinstance(value, str) else value

    @field_validator("base_url", "api_key", "api_version", mode="before")
    @classmethod
    def _strip_optional(cls, value: Any) -> Any:
        value = blank_to_none(value)
        return value.strip() if isinstance(value, str) else value

    @field_validator("tool_calling", "transport", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("api_type", mode="before")
    @classmethod
    def _normalise_api_type(cls, value: Any) -> Any:
        if value is None:
            return "openai"
        if isinstance(value, str):
            return value.strip().lower() or "openai"
        return value

    @model_validator(mode="before")
    @classmethod
    def _refuse_bedrock(cls, data: Any) -> Any:
        # Upstream's aws api_type meant Bedrock's own API; sent as OpenAI requests it would only
        # fail later, so say so now (before base_url, which for Bedrock has no scheme).
        kind = data.get("api_type") if isinstance(data, Mapping) else None
        if isinstance(kind, str) and kind.strip().lower() == "aws":
            from app.bedrock import BEDROCK_MESSAGE

            raise ValueError(BEDROCK_MESSAGE)
        return data

    @field_validator("base_url")
    @classmethod
    def _check_base_url(cls, value: str | None) -> str | None:
        # A URL without a scheme reached the HTTP client only to fail like a network outage,
        # retried for over half a minute.
        if value is not None and not value.lower().startswith(("http://", "https://")):
            raise ValueError(
                f"must be a full URL starting with http:// or https://, "
                f"got {value!r} (for example https://api.openai.com/v1)"
            )
        return value

    @model_validator(mode="after")
    def _check_consistency(self) -> LLMSettings:
        if self.api_type == "azure" and not self.api_version:
            raise ValueError(
                'api_type "azure" needs api_version (for example api_version = "2024-10-21")'
            )
        if self.api_type == "azure" and self.transport == "httpx":
            raise ValueError('api_type "azure" needs the openai SDK: use transport = "openai"')
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


class CompactionSettings(SettingsModel):
    """When and how an agent shrinks its conversation to fit the model's context window."""

    enabled: bool = True
    #: Compact when a request would use more than this share of the window...
    trigger: float = Field(default=0.85, gt=0.0, le=1.0)
    #: ...down to this share.
    target: float = Field(default=0.6, gt=0.0, le=1.0)
    #: Newest turns (a model answer with its tool results) always kept word for word.
    keep_recent_turns: PositiveInt = 3
    #: Older tool outputs longer than this many characters are shortened to a stub first.
    stub_chars: PositiveInt = 800
    #: Longest summary the model may write, in tokens.
    summary_max_tokens: PositiveInt = 1024

    @model_validator(mode="after")
    def _check_order(self) -> CompactionSettings:
        if self.target > self.trigger:
            raise ValueError(f"target ({self.target}) must not exceed trigger ({self.trigger})")
        return self


class LimitsSettings(SettingsModel):
    """Caps on what one model reply may make the agent do or store (``[limits]``): a reply
    is untrusted input, and without them its size is multiplied by every copy made of it."""

    #: Tool calls of one assistant reply that run; the others are answered "not run".
    max_tool_calls_per_reply: PositiveInt = 16
    #: Characters of one text a session file repeats (events, run records): the full text is
    #: kept once, in its message record; the repeats are cut to this with a marker.
    max_stored_text_chars: PositiveInt = 20_000


# Every name of __all__ not defined above is a section of app.config_sections.
__getattr__ = lazy_getattr(
    __name__, {name: "app.config_sections" for name in __all__ if name not in globals()}
)
