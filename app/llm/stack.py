"""The model stack, built in one place: the only module of ``app.llm`` outside the wire
packages that knows them. A profile's ``api_type`` picks the wire model; every model, a
profile's or a user's own (``LLM.from_model``), then gets the same wrappers::

    TextToolCalls          how tools are called: native, text or constrained (profiles)
      Retrying             the one retry path: transient errors retried, with backoff
        Recording          the context's recording tape (which may answer instead)
          RateGate         the context's rate-limit gate, and the in-flight bound
            Timed          the context's request timer
              wire model   OpenAIChatModel ("openai", "azure", "ollama", any other api_type),
                           BedrockModel ("aws"), AnthropicModel ("anthropic"); or yours

The wrappers below ``Retrying`` see each attempt. Bedrock's and Anthropic's packages, and
their SDKs, are imported only when a profile names them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from app.exceptions import ConfigError
from app.install_hint import pip_install
from app.llm.constrained import ConstrainedCalls, StructuredOutput
from app.llm.context import RateGate, Timed
from app.llm.model import Model
from app.llm.openai.model import OpenAIChatModel
from app.llm.openai.structured import OpenAIStructuredOutput
from app.llm.openai.transport import Transport
from app.llm.recording import Recording
from app.llm.refusals import Refusals
from app.llm.retry import Retrying
from app.llm.text_mode import TextToolCalls

if TYPE_CHECKING:
    from app.config import LLMSettings
    from app.llm.endpoint_memory import EndpointMemories

#: The settings a wire model is reached by: changing others keeps its connections.
CONNECTION_FIELDS = (
    "base_url",
    "api_key",
    "api_type",
    "api_version",
    "transport",
    "max_concurrent_requests",
    "aws_region",
    "aws_profile",
)

#: api_types with a wire model of their own (not OpenAI's chat completions), and the extra
#: that installs its SDK.
NATIVE_APIS = {"aws": "bedrock", "anthropic": "anthropic"}


class Stack:
    """A built stack: the ``model`` to call, the ``wire`` model at its bottom, and what the
    endpoint refused (``refusals``; None over a user's model). A plain class: a dataclass
    costs a millisecond of start-up to create."""

    __slots__ = ("model", "refusals", "wire")

    def __init__(self, model: Model, wire: Model, refusals: Refusals | None = None) -> None:
        self.model = model
        self.wire = wire
        self.refusals = refusals


def build_model(
    settings: LLMSettings,
    memories: EndpointMemories | None,
    transport: Transport | None = None,
    previous: Stack | None = None,
) -> Stack:
    """The stack for a profile. What the endpoint refuses is kept in ``memories`` unless the
    profile says ``capability_cache = false``. Rebuilt after a change of settings, the
    ``previous`` stack's connections are kept while an OpenAI-compatible endpoint is reached
    the same way, and what it refused while it is the same endpoint and model. ``transport``
    (OpenAI-compatible profiles only) replaces the one the profile would get."""
    old: Any = getattr(previous.wire, "settings", None) if previous is not None else None

    def same(*fields: str) -> bool:
        return old is not None and all(getattr(old, f) == getattr(settings, f) for f in fields)

    if (
        previous is not None
        and previous.refusals is not None
        and same("base_url", "model", "capability_cache")
    ):
        refusals = previous.refusals
    else:
        kept = memories if settings.capability_cache else None
        refusals = Refusals(settings.base_url or "", settings.model, kept)
    wire: Model
    structured: StructuredOutput | None = None
    if settings.api_type in NATIVE_APIS:
        if transport is not None:
            raise TypeError(
                f"transport= is for OpenAI-compatible profiles, not {settings.api_type!r}"
            )
        wire = native_model(settings)  # built from all its settings: made anew
    else:
        if previous is not None and isinstance(previous.wire, OpenAIChatModel):
            if transport is None and same(*CONNECTION_FIELDS):
                transport = previous.wire.transport
        given = transport

        def connect() -> Transport:  # on the first request: the SDK alone costs ~0.3 s
            return given or transport_for(settings)

        wire = OpenAIChatModel(settings, refusals, connect)
        structured = OpenAIStructuredOutput(settings)  # constrained tool calling's fields
    inner = _wrapped(wire, settings)
    constrained = (
        ConstrainedCalls(
            inner, refusals, structured, settings.stream is not True, settings.constrained_steps
        )
        if structured
        else None
    )
    model = TextToolCalls(inner, refusals, settings.tool_calling, constrained)
    return Stack(model, wire, refusals)


def wrap_model(model: Model, settings: LLMSettings) -> Stack:
    """The stack over a user's own model: the same wrappers, without text tool calling."""
    return Stack(_wrapped(model, settings), model)


def _wrapped(wire: Model, settings: LLMSettings) -> Model:
    return Retrying(Recording(RateGate(Timed(wire), settings.max_concurrent_requests)), settings)


def native_model(settings: LLMSettings) -> Model:
    """The wire model of a native API, its package imported on first use: ``import
    app.agent.manus`` loads neither boto3/botocore nor the anthropic SDK unless a profile asks
    for them. A missing SDK is a ``ConfigError`` naming the extra to install."""
    try:
        if settings.api_type == "aws":
            from app.llm.bedrock import BedrockModel

            return BedrockModel.from_settings(settings)
        from app.llm.anthropic import AnthropicModel

        return AnthropicModel.from_settings(settings)
    except ImportError as e:  # an SDK the package imports at once (they check it first)
        extra = NATIVE_APIS[settings.api_type]
        raise ConfigError(
            f"api_type {settings.api_type!r} (model {settings.model!r}) needs the {extra} "
            f"extra ({e.name or e} is not installed): {pip_install(extra)}"
        ) from e


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
