"""``LLM``: the one place requests to the model are built, sent, retried and accounted for.

One path for every request: ``request()`` (and upstream's ``ask*`` methods on top of it)
formats the messages, builds the body from JSON encoded once per message (``app.llm.formatting``,
``app.llm.wire``) and hands it to a transport (``app.llm.transport``): plain HTTP with httpx2 by
default, the openai SDK for Azure or when asked, or an in-process function in unit tests.
Whether a turn is streamed, and what happens when an endpoint refuses, is
``app.llm.exchange``'s: by default turns stream when someone watches the text or the endpoint is
slow. An endpoint that refuses streaming, or tools, is remembered per endpoint and model
(``app.llm.endpoint_memory``), across processes unless the profile says
``capability_cache = false``.
"""

from __future__ import annotations

import asyncio
import copy
from typing import TYPE_CHECKING, Any, ClassVar

from app.exceptions import (
    ContextWindowExceededError,
    ToolsNotSupportedError,
)
from app.llm.capabilities import default_reasoning_model, default_supports_images
from app.llm.context import usage_sink
from app.llm.exchange import TurnExchange
from app.llm.messages import (
    Completion,
    Formatted,
    format_messages,
    prepare_messages,
)
from app.llm.model import Model, ModelParams, ModelResponse, ToolDefinition
from app.llm.pricing import cost_of, price_for
from app.llm.profiles import resolve_settings
from app.llm.retry import with_retries
from app.llm.streaming import DeltaRelay
from app.llm.transport import (
    DeltaCallback,
    Transport,
    deliver,
)
from app.llm.upstream_api import Messages, UpstreamAsk
from app.llm.usage import Usage
from app.llm.windows import known_window
from app.llm.wire import count_tokens, dumps, encode_body
from app.logger import log_enabled, logger, register_secret
from app.schema import TOOL_CHOICE_VALUES, Message, ToolChoice

if TYPE_CHECKING:
    from app.config import LLMSettings
    from app.tokens import TokenCounter

__all__ = ["LLM", "model_argument"]


class LLM(UpstreamAsk):
    """A chat model behind an OpenAI-compatible endpoint (OpenAI, Azure, Ollama, vLLM, ...).

    ``LLM(config_name)`` returns one shared instance per config name, as upstream does;
    ``LLM.create(...)`` builds an independent one (for libraries and tests).
    """

    _instances: ClassVar[dict[str, LLM]] = {}

    def __new__(cls, config_name: str = "default", llm_config: Any = None, **kwargs: Any) -> LLM:
        instance = cls._instances.get(config_name)
        if instance is None:
            instance = super().__new__(cls)
            instance._initialized = False
            cls._instances[config_name] = instance
        return instance

    def __init__(self, config_name: str = "default", llm_config: Any = None, **kwargs: Any) -> None:
        if getattr(self, "_initialized", False):
            return
        try:
            self._setup(config_name, resolve_settings(config_name, llm_config))
        except BaseException:
            type(self)._instances.pop(config_name, None)
            raise
        self._initialized = True

    @classmethod
    def create(
        cls,
        config_name: str = "default",
        llm_config: Any = None,
        *,
        transport: Transport | None = None,
        **overrides: Any,
    ) -> LLM:
        """An independent instance, not shared and not registered as the singleton.

        ``llm_config`` may be an ``LLMSettings``, a dict of settings, or a dict of profiles;
        ``overrides`` replace individual settings (e.g. ``base_url=...``). ``transport``
        replaces the HTTP transport (e.g. ``app.testing.FunctionModel`` in unit tests).
        """
        instance = super().__new__(cls)
        settings = resolve_settings(config_name, llm_config)
        if overrides:
            settings = settings.model_copy(update=overrides)
        instance._setup(config_name, settings, transport)
        instance._initialized = True
        return instance

    @classmethod
    def from_model(cls, model: Model, **overrides: Any) -> LLM:
        """Upstream's facade (``ask*``, usage, token counting) over any :class:`Model`.

        ``overrides`` set the facade's settings (``max_tokens``, ``temperature``,
        ``max_retries``, ``max_input_tokens``, ...); the model's ``name`` is its ``model``.
        Transient errors the model raises are retried as the settings say.
        """
        if not isinstance(model, Model):
            raise TypeError(
                f"{type(model).__name__} is not a Model: it needs a `name` and an async "
                "`request(messages, params)` (see docs/llm.md, Bring your own model)"
            )
        from app.config_models import LLMSettings

        name = getattr(model, "name", "") or type(model).__name__
        settings = LLMSettings(model=name, **{"capability_cache": False, **overrides})
        instance = super().__new__(cls)
        instance._setup(f"model:{name}", settings)
        instance._custom = model
        instance._initialized = True
        return instance

    @property
    def custom_model(self) -> Model | None:
        """The :class:`Model` this facade was built over (``from_model``), else None."""
        return self._custom

    @classmethod
    def reset_instances(cls) -> None:
        """Forget the shared instances (after the config changed, and in tests)."""
        cls._instances.clear()

    def _setup(
        self, config_name: str, settings: LLMSettings, transport: Transport | None = None
    ) -> None:
        self.config_name = config_name
        self.settings = settings
        self.model: str = settings.model
        self.max_tokens: int = settings.max_tokens
        self.temperature: float = settings.temperature
        self.api_type: str = settings.api_type
        self.api_key: str | None = settings.api_key
        register_secret(self.api_key)  # also for settings built in code, not loaded from a file
        self.api_version: str | None = settings.api_version
        self.base_url: str | None = settings.base_url
        self.max_input_tokens: int | None = settings.max_input_tokens
        self.timeout: float = settings.timeout
        self.max_retries: int = settings.max_retries
        self.is_reasoning_model: bool = (
            settings.reasoning_model
            if settings.reasoning_model is not None
            else default_reasoning_model(settings.model)
        )
        self.supports_images: bool = (
            settings.supports_images
            if settings.supports_images is not None
            else default_supports_images(settings.model)
        )
        self.usage = Usage()
        #: Deprecated: the usage of the most recent call. Use ``request()``'s
        #: ``ModelResponse.usage`` (concurrent callers overwrite this one).
        self.last_usage: Usage | None = None
        self._tools_cache: tuple[Any, bytes] | None = None
        self._fields_cache: tuple[dict[str, Any], tuple[type, ...], bytes] | None = None
        self._counter: TokenCounter | None = None
        self._warned_images = False
        self._warned_prose_calls = False
        self._learned_window: int | None = None
        self._known_window: tuple[str, int | None] | None = None
        self._wire = TurnExchange(settings, transport)
        self._custom: Model | None = None

    def __repr__(self) -> str:
        return (
            f"LLM(config_name={self.config_name!r}, model={self.model!r}, "
            f"base_url={self.base_url!r})"
        )

    # ---- usage, upstream-compatible names ------------------------------------------------

    @property
    def total_input_tokens(self) -> int:
        return self.usage.prompt_tokens

    @property
    def total_completion_tokens(self) -> int:
        return self.usage.completion_tokens

    def update_token_count(self, input_tokens: int, completion_tokens: int = 0) -> None:
        self._record_usage(
            Usage(
                prompt_tokens=input_tokens,
                completion_tokens=completion_tokens,
                total_tokens=input_tokens + completion_tokens,
                requests=1,
            )
        )

    def _record_usage(self, usage: Usage) -> None:
        if usage.cost is None:
            price = price_for(self.model)
            if price is not None:
                usage.cost = cost_of(usage, price)
        self.last_usage = usage
        self.usage.add(usage)
        sink = usage_sink.get()
        if sink is not None:
            sink.add(usage)
        if log_enabled("DEBUG"):
            logger.debug(f"LLM usage: {usage} | cumulative: {self.usage}")

    # ---- token counting and the context window ------------------------------------------------

    @property
    def token_counter(self) -> TokenCounter:
        if self._counter is None:
            from app.tokens import TokenCounter

            self._counter = TokenCounter(self.model)
        return self._counter

    async def _loaded_counter(self) -> TokenCounter:
        """The counter, loaded off the event loop the first time (loading may read files or
        wait on a download; it logs, never prints)."""
        counter = self.token_counter
        if not counter.loaded:
            await asyncio.to_thread(counter.load)
        return counter

    def count_tokens(self, text: str) -> int:
        return self.token_counter.count_text(text) if text else 0

    def count_message_tokens(self, messages: list[dict[str, Any]]) -> int:
        return self.token_counter.count_messages(messages)

    @property
    def context_window(self) -> int | None:
        """Input tokens a request may take: ``max_input_tokens``, else the window the server
        named when it rejected an oversized request, else a known window for the model."""
        if self.max_input_tokens or self._learned_window:
            return self.max_input_tokens or self._learned_window
        cached = self._known_window
        if cached is None or cached[0] != self.model:  # looked up once per model, not per step
            cached = self._known_window = (self.model, known_window(self.model))
        return cached[1]

    def check_token_limit(self, input_tokens: int) -> bool:
        """True when ``input_tokens`` fits the per-request window (``max_input_tokens``)."""
        return self.max_input_tokens is None or input_tokens <= self.max_input_tokens

    def get_limit_error_message(self, input_tokens: int) -> str:
        return (
            f"The request needs {input_tokens} input tokens, more than max_input_tokens="
            f"{self.max_input_tokens} for model '{self.model}'."
        )

    async def _check_window(self, formatted: Formatted, tools: list[dict[str, Any]] | None) -> None:
        """Refuse a request before sending it only when ``max_input_tokens`` is set and the
        count is exact: an offline estimate is a guess, and the server has the last word."""
        if self.max_input_tokens is None:
            return
        counter = await self._loaded_counter()
        exact = getattr(counter, "exact", None)
        if exact is None:  # counters without the flag: exact unless estimating
            exact = not counter.estimated
        if not exact:
            return
        needed = count_tokens(counter, formatted.messages, formatted.entries)
        needed += counter.count_tools(tools)
        if not self.check_token_limit(needed):
            raise ContextWindowExceededError(
                self.get_limit_error_message(needed),
                tokens=needed,
                limit=self.max_input_tokens,
                model=self.model,
            )

    async def count_request_tokens(
        self,
        messages: Messages,
        system_msgs: Messages | None = None,
        tools: list[dict[str, Any]] | None = None,
    ) -> int:
        """Input tokens a request over these messages, system prompt and tools would take."""
        formatted = self._prepare(messages, system_msgs)
        counter = await self._loaded_counter()
        return count_tokens(counter, formatted.messages, formatted.entries) + counter.count_tools(
            tools
        )

    # ---- message formatting --------------------------------------------------------------------

    def format_messages(
        self, messages: Messages, supports_images: bool | None = None
    ) -> list[dict[str, Any]]:
        """Wire-format messages (upstream's name); images follow this model's abilities.

        Returns fresh dicts the caller may change.
        """
        allowed = self._images_allowed() if supports_images is None else supports_images
        formatted, omitted = format_messages(messages, supports_images=allowed, model=self.model)
        self._warn_omitted(omitted)
        return formatted

    def _images_allowed(self) -> bool:
        return self.supports_images and "images" not in self.refused_features

    def _warn_omitted(self, omitted: int) -> None:
        if omitted and not self._warned_images:
            self._warned_images = True
            logger.warning(
                f"Model '{self.model}' is not configured for images; {omitted} image(s) were "
                "replaced by a note. Set supports_images = true in its [llm] section if it "
                "accepts them."
            )

    def _prepare(self, messages: Messages, system_msgs: Messages | None) -> Formatted:
        formatted = prepare_messages(
            messages,
            system=system_msgs,
            supports_images=self._images_allowed(),
            model=self.model,
        )
        self._warn_omitted(formatted.omitted)
        return formatted

    def _body(
        self,
        formatted: Formatted,
        *,
        temperature: float | None,
        stream: bool,
        extra: dict[str, Any],
    ) -> bytes:
        """The request body as JSON bytes: cached message fragments joined, not re-encoded."""
        body: dict[str, Any] = {"model": self.model}
        if self.is_reasoning_model:
            body["max_completion_tokens"] = self.max_tokens
        else:
            body["max_tokens"] = self.max_tokens
            body["temperature"] = self.temperature if temperature is None else temperature
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        body.update(extra)
        body.pop("messages", None)
        tools = body.pop("tools", None)
        return encode_body(formatted.fragments, self._fields_json(body), self._tools_json(tools))

    def _fields_json(self, fields: dict[str, Any]) -> bytes:
        """The body's other fields as JSON, reused while they stay the same plain values
        (they do from one step to the next)."""
        kinds = tuple(map(type, fields.values()))  # 1 == 1.0 == True, but not in JSON
        cached = self._fields_cache
        if cached is not None and cached[1] == kinds and cached[0] == fields:
            return cached[2]
        encoded = dumps(fields)
        if _PLAIN.issuperset(kinds):  # nothing that could be edited in place
            self._fields_cache = (fields, kinds, encoded)
        return encoded

    def _tools_json(self, tools: Any) -> bytes | None:
        """The tool definitions' JSON, re-encoded only when they change (an agent offers the
        same tools at every step; comparing them is far cheaper than encoding them)."""
        if tools is None:
            return None
        cached = self._tools_cache
        if cached is not None and cached[0] == tools:
            return cached[1]
        encoded = dumps(tools)
        self._tools_cache = (copy.deepcopy(tools), encoded)
        return encoded

    # ---- what the endpoint refused ------------------------------------------------------------

    @property
    def refused_features(self) -> frozenset[str]:
        """What this endpoint and model refused (``stream``, ``stream_tools``, ``tools``,
        ``images``), learned in this process or, with ``capability_cache``, an earlier one."""
        return self._wire.refusals.features

    @property
    def streams_refused(self) -> bool:
        """The endpoint refused streamed requests (they are sent plain from then on)."""
        return "stream" in self.refused_features

    async def _refuse(self, feature: str, why: str) -> None:
        await self._wire.refusals.refuse(feature, why)

    # ---- transport -----------------------------------------------------------------------------

    @property
    def transport(self) -> Transport:
        """The transport requests go through (built from the profile on first use)."""
        return self._wire.transport

    async def _exchange(
        self,
        formatted: Formatted,
        *,
        extra: dict[str, Any],
        temperature: float | None,
        timeout: float | None,
        relay: DeltaRelay | None,
        stream: bool | None,
    ) -> Completion:
        """The completion for one turn (``app.llm.exchange`` decides whether it streams); a
        context window named by an overflow error is learned."""

        def build(streamed: bool) -> bytes:
            return self._body(formatted, temperature=temperature, stream=streamed, extra=extra)

        try:
            return await self._wire.exchange(
                build,
                tools=bool(extra.get("tools")),
                timeout=timeout or self.timeout,
                max_retries=self.max_retries,
                relay=relay,
                stream=stream,
            )
        except ContextWindowExceededError as e:
            if e.limit and not self.max_input_tokens:
                self._learned_window = e.limit
            raise

    async def _usage_from(
        self, reported: dict[str, Any] | None, formatted: Formatted, text: str
    ) -> Usage:
        usage = Usage.from_api(reported)
        if usage is None:  # the endpoint reported none: estimate, and say so
            counter = await self._loaded_counter()
            prompt = count_tokens(counter, formatted.messages, formatted.entries)
            completion = counter.count_text(text) if text else 0
            usage = Usage(
                prompt_tokens=prompt,
                completion_tokens=completion,
                total_tokens=prompt + completion,
                requests=1,
                estimated=True,
            )
        self._record_usage(usage)
        return usage

    # ---- the one request path ------------------------------------------------------------------

    async def request(
        self,
        messages: Messages,
        system_msgs: Messages | None = None,
        *,
        timeout: float | None = None,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: ToolChoice | str = ToolChoice.AUTO,
        temperature: float | None = None,
        on_delta: DeltaCallback | None = None,
        stream: bool | None = None,
        **kwargs: Any,
    ) -> ModelResponse:
        """One model turn that may call tools.

        ``tool_calls`` carry normalized JSON-text arguments (dicts and double-encoded JSON from
        lenient servers are decoded); malformed text is kept verbatim for the agent to report.
        With ``on_delta`` the turn is streamed (unless the profile's ``stream`` is off or the
        endpoint refused) and each piece of the answer's text is handed to it as it arrives;
        ``stream=False`` sends it plain whatever the profile says.
        """
        choice = tool_choice.value if isinstance(tool_choice, ToolChoice) else tool_choice
        if choice not in TOOL_CHOICE_VALUES:
            raise ValueError(f"Invalid tool_choice: {tool_choice!r}")
        if tools:
            for tool in tools:
                if not isinstance(tool, dict) or "type" not in tool:
                    raise ValueError("Each tool must be a dict with a 'type' field")
        formatted = self._prepare(messages, system_msgs)
        await self._check_window(formatted, tools)
        if self._custom is not None:
            return await self._model_turn(
                self._custom,
                formatted,
                ModelParams(
                    tools=tuple(ToolDefinition.from_param(t) for t in tools or ()),
                    tool_choice=choice,
                    max_tokens=self.max_tokens,
                    temperature=self.temperature if temperature is None else temperature,
                    timeout=timeout or self.timeout,
                    on_delta=on_delta,
                ),
                [*(system_msgs or ()), *messages],
            )

        async def in_prompt(tools: list[dict[str, Any]]) -> ModelResponse:
            """The turn with the tools described in the prompt (text tool calling)."""
            return await self._text_turn(
                formatted,
                tools,
                choice,
                temperature=temperature,
                timeout=timeout,
                on_delta=on_delta,
                stream=stream,
                extra=kwargs,
            )

        if tools and self._text_tools():
            return await in_prompt(tools)
        extra = dict(kwargs)
        if tools:
            extra["tools"] = tools
            extra["tool_choice"] = choice
        try:
            response = await self._turn(
                formatted,
                extra=extra,
                temperature=temperature,
                timeout=timeout,
                on_delta=on_delta,
                stream=stream,
            )
        except ToolsNotSupportedError as e:
            if not tools or self.settings.tool_calling != "auto":
                raise
            await self._refuse("tools", e.message)
            return await in_prompt(tools)
        if tools and choice != "none" and not response.message.tool_calls:
            self._note_prose_calls(response, tools)
        return response

    async def _model_turn(
        self, model: Model, formatted: Formatted, params: ModelParams, messages: Messages
    ) -> ModelResponse:
        """One turn of a user's :class:`Model`: typed messages in, retries as configured,
        text handed to ``on_delta`` in one piece when the model did not stream it, usage
        recorded (estimated when the model reported none)."""
        typed = [_typed(m) for m in messages]
        relay = DeltaRelay(params.on_delta) if params.on_delta is not None else None
        if relay is not None:

            async def on_delta(piece: str) -> None:
                await deliver(relay.target, relay.new_text(piece))

            params.on_delta = on_delta

        async def attempt() -> ModelResponse:
            if relay is not None:
                relay.attempt()
            return await model.request(typed, params)

        response = await with_retries(attempt, max_retries=self.max_retries, settings=self.settings)
        if not isinstance(response, ModelResponse):
            raise TypeError(
                f"{type(model).__name__}.request() returned {type(response).__name__}, "
                "not a ModelResponse"
            )
        if relay is not None and not relay.delivered:
            await deliver(relay.target, response.message.content)
        usage = response.usage
        if usage.requests or usage.total_tokens:
            usage.requests = usage.requests or 1
            self._record_usage(usage)
        else:
            text = _produced_text(response.message)
            response.usage = await self._usage_from(None, formatted, text)
        return response

    def _note_prose_calls(self, response: ModelResponse, tools: list[dict[str, Any]]) -> None:
        """A native turn answered in text that looks like a call: never run, never remembered.

        The model's prose is not the endpoint's word: a reply that quotes a call (to explain
        one, say) must not execute it, nor mark the endpoint as refusing tools. Only an
        endpoint's own refusal switches ``auto`` to text mode; a server that silently drops the
        tools (a model's own chat template) needs ``tool_calling = "text"``, which the warning
        names once per ``LLM``.
        """
        if self._warned_prose_calls or not response.message.content:
            return
        from app.llm.text_mode import text_mode_response, tool_names

        if text_mode_response(response, tool_names(tools)) is not response:
            self._warned_prose_calls = True
            logger.warning(
                f"Model '{self.model}' wrote what looks like a tool call in its text instead "
                "of using the API's tool calls; it was not run. If the server leaves the tools "
                'out of the prompt (a model\'s own chat template), set tool_calling = "text" '
                "in its [llm] section."
            )

    async def _text_turn(
        self,
        formatted: Formatted,
        tools: list[dict[str, Any]],
        choice: Any,
        *,
        temperature: float | None,
        timeout: float | None,
        on_delta: DeltaCallback | None,
        stream: bool | None,
        extra: dict[str, Any],
    ) -> ModelResponse:
        """A turn with the tools in the prompt and the calls parsed from the answer."""
        from app.llm.text_mode import text_mode_messages, text_mode_response, tool_names

        if choice == "none":
            return await self._turn(
                formatted,
                extra=extra,
                temperature=temperature,
                timeout=timeout,
                on_delta=on_delta,
                stream=stream,
            )
        rewritten = text_mode_messages(formatted, tools, choice)
        response = await self._turn(
            rewritten,
            extra=extra,
            temperature=temperature,
            timeout=timeout,
            on_delta=on_delta,
            stream=stream,
        )
        return text_mode_response(response, tool_names(tools))

    def _text_tools(self) -> bool:
        """Tools are described in the prompt instead of sent (profile, or a past refusal)."""
        mode = self.settings.tool_calling
        return mode == "text" or (mode == "auto" and "tools" in self.refused_features)

    async def _turn(
        self,
        formatted: Formatted,
        *,
        extra: dict[str, Any],
        temperature: float | None,
        timeout: float | None,
        on_delta: DeltaCallback | None,
        stream: bool | None,
    ) -> ModelResponse:
        relay = DeltaRelay(on_delta) if on_delta is not None else None
        completion = await self._exchange(
            formatted,
            extra=extra,
            temperature=temperature,
            timeout=timeout,
            relay=relay,
            stream=stream,
        )
        return await self._respond(completion, formatted, relay)

    async def _respond(
        self, completion: Completion, formatted: Formatted, relay: DeltaRelay | None
    ) -> ModelResponse:
        """The response for a parsed completion: usage recorded, unstreamed text delivered."""
        message = completion.message
        if completion.finish_reason == "length" and not message.tool_calls:
            logger.warning(
                f"The answer of model '{self.model}' was cut at max_tokens={self.max_tokens}"
            )
        if relay is not None and not relay.delivered:  # not streamed: the text in one piece
            await deliver(relay.target, message.content)
        usage = await self._usage_from(completion.usage, formatted, _produced_text(message))
        return ModelResponse(
            message=message,
            usage=usage,
            finish_reason=completion.finish_reason,
            reasoning=completion.reasoning,
        )

    async def aclose(self) -> None:
        """Close the HTTP connection pool (optional: it is also released at exit)."""
        await self._wire.aclose()


#: Types whose values cannot change in place (a cached encoding of them stays true).
_PLAIN = frozenset({str, int, float, bool, type(None)})


def model_argument(data: Any) -> Any:
    """For the ``model=`` argument of agents and flows (a pydantic "before" validator): any
    :class:`Model` becomes their ``llm``, upstream's facade over it."""
    if not isinstance(data, dict) or "model" not in data:
        return data
    data = dict(data)
    model = data.pop("model")
    if data.get("llm") is not None:
        raise ValueError("give either llm= or model=, not both")
    data["llm"] = model if isinstance(model, LLM) else LLM.from_model(model)
    return data


def _typed(message: Message | dict[str, Any]) -> Message:
    """A message as our type (upstream lets callers pass plain dicts)."""
    return message if isinstance(message, Message) else Message.model_validate(message)


def _produced_text(message: Message) -> str:
    """What the model wrote, tool calls included (for estimating unreported usage)."""
    text = message.content or ""
    for call in message.tool_calls or ():
        text += call.function.name + call.function.arguments
    return text
