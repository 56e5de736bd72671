"""The model stack a profile gets, built in one place.

A request from ``LLM`` goes down this stack, each layer wrapping the next::

    TextToolCalls          tools in the prompt when the endpoint is in text mode
      OpenAIChatModel      wire format, streaming choice, refusals learned, retries
        Recording          the context's recording tape (which may answer instead)
          RateGate         the context's rate-limit gate
            Timed          the context's request timer
              transport    HTTP, or the openai SDK

The transport layers see each attempt (retries included) with its exact wire body. A model
of your own (``LLM.from_model``) gets :class:`~app.llm.retry.Retrying` around it instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.exceptions import ConfigError
from app.install_hint import pip_install
from app.llm.context import RateGate, Timed
from app.llm.model import Model
from app.llm.openai.model import OpenAIChatModel
from app.llm.openai.transport import Transport
from app.llm.recording import Recording
from app.llm.refusals import Refusals
from app.llm.retry import Retrying
from app.llm.text_mode import TextToolCalls

if TYPE_CHECKING:
    from app.config import LLMSettings
    from app.llm.endpoint_memory import EndpointMemories

#: The settings a transport is made from: changing others keeps its connections.
CONNECTION_FIELDS = (
    "base_url",
    "api_key",
    "api_type",
    "api_version",
    "transport",
    "max_concurrent_requests",
)


def build_model(
    settings: LLMSettings,
    memories: EndpointMemories | None,
    transport: Transport | None = None,
    previous: OpenAIChatModel | None = None,
) -> tuple[Model, OpenAIChatModel | None]:
    """The stack for a profile, and its endpoint model when it is an OpenAI-compatible one.
    What the endpoint refuses is kept in ``memories`` unless the profile says
    ``capability_cache = false``. Rebuilt after a change of settings, the ``previous``
    endpoint's transport is kept while it is reached the same way, and what it refused while
    it is the same endpoint and model."""
    if settings.api_type in NATIVE_APIS:
        return Retrying(native_model(settings), settings), None
    old = previous.settings if previous is not None else None

    def same(*fields: str) -> bool:
        return old is not None and all(getattr(old, f) == getattr(settings, f) for f in fields)

    if previous is not None and transport is None and same(*CONNECTION_FIELDS):
        transport = previous.transport
    if previous is not None and same("base_url", "model", "capability_cache"):
        refusals = previous.refusals
    else:
        kept = memories if settings.capability_cache else None
        refusals = Refusals(settings.base_url or "", settings.model, kept)

    def connect() -> Transport:  # on the first request: the SDK alone costs ~0.3 s to import
        return Recording(RateGate(Timed(transport or transport_for(settings))))

    endpoint = OpenAIChatModel(settings, refusals, connect)
    return TextToolCalls(endpoint, refusals, settings.tool_calling), endpoint


#: api_types with a wire model of their own (not OpenAI's chat completions), and the extra
#: that installs its SDK.
NATIVE_APIS = {"aws": "bedrock", "anthropic": "anthropic"}


def native_model(settings: LLMSettings) -> Model:
    """The wire model of a native API, imported on first use: ``import app.agent.manus``
    loads neither boto3 nor the anthropic SDK unless a profile asks for them."""
    extra = NATIVE_APIS[settings.api_type]
    try:
        if settings.api_type == "aws":
            from app.llm.bedrock import BedrockModel  # type: ignore[import-not-found,attr-defined,unused-ignore]

            model: Model = BedrockModel.from_settings(settings)
        else:
            from app.llm.anthropic import (  # type: ignore[import-not-found,attr-defined,unused-ignore]
                AnthropicModel,
            )

            model = AnthropicModel.from_settings(settings)
    except ModuleNotFoundError as e:
        if (e.name or "").startswith("app."):
            raise ConfigError(
                f"api_type {settings.api_type!r} is not available in this version of "
                f"OpenManus-py ({e.name} is missing)"
            ) from e
        raise ConfigError(
            f"api_type {settings.api_type!r} (model {settings.model!r}) needs the {extra} "
            f"extra ({e.name} is not installed): {pip_install(extra)}"
        ) from e
    return model


def wrap_model(model: Model, settings: LLMSettings) -> Model:
    """The stack over a user's own model: its transient errors retried."""
    return Retrying(model, settings)


def transport_for(settings: LLMSettings) -> Transport:
    """The profile's transport: the openai SDK for Azure or ``transport = "openai"``, else
    plain HTTP (each imported on first use: the SDK alone costs ~0.3 s)."""
    if settings.api_type == "azure" or settings.transport == "openai":
        from app.llm.openai.sdk_transport import OpenAITransport

        return OpenAITransport(
            base_url=settings.base_url,
            api_key=settings.api_key,
            azure=settings.api_type == "azure",
            api_version=settings.api_version,
        )
    from app.llm.openai.http_transport import HttpTransport

    return HttpTransport(
        base_url=settings.base_url,
        api_key=settings.api_key,
        max_connections=settings.max_concurrent_requests,
    )
