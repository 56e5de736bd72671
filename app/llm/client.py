"""``LLM``: upstream's facade (``ask*``, usage, token counting, one instance per config name)
over a :class:`~app.llm.Model`: a profile's stack (``app.llm.stack.build_model``) or any
``Model`` given to ``LLM.from_model``. Every model gets the window check and usage records,
and receives typed ``Message``s only (upstream's dicts are converted here, ``app.llm.messages``).
It knows no wire format: counting asks the model (``CountsTokens``) or estimates over our types.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import AsyncIterator, Sequence
from typing import Any, ClassVar

from app.config import LLMSettings
from app.exceptions import (
    ContextWindowExceededError,
    ImagesNotSupportedError,
    LLMResponseError,
    LLMServerError,
)
from app.llm.capabilities import model_flags
from app.llm.context import usage_sink
from app.llm.deltas import DeltaRelay, deliver
from app.llm.endpoint_memory import PROCESS_MEMORIES, EndpointMemories
from app.llm.messages import Measured, attach_images, typed_all, upstream_dicts
from app.llm.model import DeltaCallback, Model, ModelParams, ModelResponse, ToolDefinition
from app.llm.pricing import cost_of, price_for
from app.llm.stack import CONNECTION_FIELDS, NATIVE_APIS, Stack, build_model, wrap_model
from app.llm.usage import Usage
from app.llm.windows import HOPELESS, ServerCounts, known_window
from app.logger import log_enabled, logger, register_secret
from app.schema import TOOL_CHOICE_VALUES, Message, ToolChoice
from app.tokens import TokenCounter

Messages = Sequence[Message | dict[str, Any]]


class LLMRegistry:
    """What a process shares between its ``LLM``s: one instance per config name (upstream's
    ``LLM(config_name)``) and the endpoints' capability memories."""

    def __init__(self, memories: EndpointMemories = PROCESS_MEMORIES) -> None:
        self.instances: dict[str, LLM] = {}
        self.memories = memories


def _setting(name: str) -> Any:
    """A facade attribute that is the profile's setting: upstream code sets ``llm.model = "x"``
    after construction, and the next request must use it (:meth:`LLM.configure`)."""
    return property(
        lambda self: getattr(self.settings, name),
        lambda self, value: self.configure(**{name: value}),
    )


class LLM:
    """``LLM(config_name)``: one shared instance per config name (in ``LLM.registry``), as
    upstream; ``LLM.create(...)``: an independent one; ``LLM.from_model(model)``: over any
    ``Model``."""

    registry: ClassVar[LLMRegistry] = LLMRegistry()
    model: str = _setting("model")
    max_tokens: int = _setting("max_tokens")
    temperature: float = _setting("temperature")
    api_type: str = _setting("api_type")
    api_key: str | None = _setting("api_key")
    api_version: str | None = _setting("api_version")
    base_url: str | None = _setting("base_url")
    max_input_tokens: int | None = _setting("max_input_tokens")
    timeout: float = _setting("timeout")
    max_retries: int = _setting("max_retries")

    def __new__(cls, config_name: str = "default", llm_config: Any = None, **kwargs: Any) -> LLM:
        _refuse_unknown("LLM()", kwargs, ("config_name", "llm_config"))
        instance = cls.registry.instances.get(config_name)
        if instance is None:
            instance = super().__new__(cls)
            cls.registry.instances[config_name] = instance
        return instance

    def __init__(self, config_name: str = "default", llm_config: Any = None, **kwargs: Any) -> None:
        if getattr(self, "_initialized", False):
            return
        try:
            self._setup(config_name, resolve_settings(config_name, llm_config))
        except BaseException:
            type(self).registry.instances.pop(config_name, None)
            raise

    @classmethod
    def create(
        cls,
        config_name: str = "default",
        llm_config: Any = None,
        *,
        transport: Any = None,
        **overrides: Any,
    ) -> LLM:
        """An independent instance, not registered. ``llm_config``: ``LLMSettings``, a dict
        of settings or of profiles; ``overrides`` replace settings (checked as the config
        file's); ``transport`` the one an OpenAI-compatible profile sends through."""
        accepted = ("config_name", "llm_config", "transport", *LLMSettings.model_fields)
        _refuse_unknown("LLM.create()", overrides, accepted)
        instance = super().__new__(cls)
        settings = resolve_settings(config_name, llm_config)
        if overrides:
            settings = _updated(settings, overrides)
        instance._setup(config_name, settings, transport)
        return instance

    @classmethod
    def from_model(cls, model: Model, **overrides: Any) -> LLM:
        """The facade over any :class:`Model`; ``overrides`` set its settings (``max_tokens``,
        ``max_retries``, ...), and transient errors are retried as they say. What they leave
        unset (``max_tokens``, ``temperature``) reaches the model as None."""
        if not isinstance(model, Model):
            raise TypeError(
                f"{type(model).__name__} is not a Model: it needs a `name` and an async "
                "`request(messages, params)` (see docs/llm.md, Bring your own model)"
            )
        _refuse_unknown("LLM.from_model()", overrides, ("model", *LLMSettings.model_fields))
        name = getattr(model, "name", "") or type(model).__name__
        settings = LLMSettings(model=name, **{"capability_cache": False, **overrides})
        instance = super().__new__(cls)
        instance._setup(f"model:{name}", settings, custom=model)
        return instance

    @property
    def custom_model(self) -> Model | None:
        """The :class:`Model` this facade was built over (``from_model``), else None."""
        return self._custom

    @classmethod
    def reset_instances(cls) -> None:
        """Forget the shared instances (after the config changed, and in tests)."""
        cls.registry.instances.clear()

    def _setup(
        self,
        config_name: str,
        settings: LLMSettings,
        transport: Any = None,
        custom: Model | None = None,
    ) -> None:
        self.config_name = config_name
        self.settings = settings
        self.usage = Usage()
        #: Deprecated (concurrent calls overwrite it): use ``ModelResponse.usage``.
        self.last_usage: Usage | None = None
        self._learned_window: int | None = None
        self._counts: ServerCounts | None = None
        self._tools: tuple[list[dict[str, Any]], tuple[ToolDefinition, ...]] | None = None
        self._measured = Measured()
        self._custom = custom
        self._transport = transport  # given in code: kept through changes, never remembered
        self._stack: Stack | None = None
        self._retired: list[Model] = []  # wire models replaced by configure()
        self._build()
        self._initialized = True

    def _build(self) -> None:
        settings = self.settings
        register_secret(settings.api_key)  # also for settings built in code, not loaded from a file
        self._counter: TokenCounter | None = None  # the model's tokenizer, loaded on use
        self.is_reasoning_model, self.supports_images = model_flags(settings)
        memories = self.registry.memories if self._transport is None else None
        where = (settings.base_url or "", settings.model)
        if self._counts is None or self._counts.key != where:  # how this endpoint counts
            kept = memories if settings.capability_cache and self._custom is None else None
            self._counts = ServerCounts(*where, kept)
        previous = self._stack
        if self._custom is not None:
            stack = wrap_model(self._custom, settings)
        else:
            stack = build_model(settings, memories, self._transport, previous)
        self._stack, self._model = stack, stack.model
        count = getattr(stack.wire, "count_tokens", None)  # optional (CountsTokens)
        self._wire_count = count if callable(count) else None
        #: ``max_input_tokens``, else the known window of the model's name (not a learned one).
        self._window = settings.max_input_tokens or known_window(settings.model)
        fields = settings.model_fields_set  # what the caller did not set reaches a model as None
        self._max_tokens = settings.max_tokens if "max_tokens" in fields else None
        self._temperature = settings.temperature if "temperature" in fields else None

    def configure(self, **changes: Any) -> None:
        """Change settings, as upstream code does with ``llm.model = "x"``: the next request
        uses them (checked like the config file's). The endpoint's connections are kept unless
        where or how it is reached changed; replaced ones are closed by :meth:`aclose`."""
        _refuse_unknown("LLM.configure()", changes, tuple(LLMSettings.model_fields))
        old, self.settings = self.settings, _updated(self.settings, changes)
        moved = any(getattr(old, f) != getattr(self.settings, f) for f in CONNECTION_FIELDS)
        stack = self._stack
        if stack is not None and self._custom is None and self._transport is None:
            if moved or old.api_type in NATIVE_APIS:  # a native wire model is made anew
                self._retired.append(stack.wire)  # its connections: closed by aclose()
        self._build()

    def __repr__(self) -> str:
        return (
            f"LLM(config_name={self.config_name!r}, model={self.model!r}, "
            f"base_url={self.base_url!r})"
        )

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

    @property
    def token_counter(self) -> TokenCounter:
        if self._counter is None:
            self._counter = TokenCounter(self.model)
        return self._counter

    async def _loaded_counter(self) -> TokenCounter:
        """The counter, loaded off the event loop the first time (it may read files)."""
        counter = self.token_counter
        if not counter.loaded:
            await asyncio.to_thread(counter.load)
        return counter

    def count_tokens(self, text: str) -> int:
        return self.token_counter.count_text(text) if text else 0

    def count_message_tokens(self, messages: list[dict[str, Any]]) -> int:
        return self.token_counter.count_messages(messages)

    @property
    def server_counts(self) -> ServerCounts:
        """How the endpoint counts prompts compared to us, learned from its answers."""
        assert self._counts is not None
        return self._counts

    @property
    def context_window(self) -> int | None:
        """Input tokens a request may take: ``max_input_tokens``, else the window the server
        named when it rejected an oversized request, else a known window for the model."""
        # Read at every step (compaction): the stated window is worked out when settings change.
        return self.settings.max_input_tokens or self._learned_window or self._window

    def check_token_limit(self, input_tokens: int) -> bool:
        """True when ``input_tokens`` fits the per-request window (``max_input_tokens``)."""
        return self.max_input_tokens is None or input_tokens <= self.max_input_tokens

    def get_limit_error_message(self, input_tokens: int) -> str:
        return (
            f"The request needs {input_tokens} input tokens, more than max_input_tokens="
            f"{self.max_input_tokens} for model '{self.model}'."
        )

    async def _check_window(
        self, conversation: list[Message], tools: tuple[ToolDefinition, ...], chars: int
    ) -> None:
        """Refuse a request before sending it when it cannot fit: over ``max_input_tokens``
        by an exact count, or over the window by far more than any count could be off
        (``HOPELESS``). Borderline ones are sent: the server has the last word. A request of
        fewer characters than the window has tokens is never counted here. The window is the
        profile's or the model's known one, never one learned from an overflow: the server
        already refused once then, and may have been restarted with a larger window since."""
        window = self._window
        if window is None:
            return
        if self.max_input_tokens is not None and (await self._loaded_counter()).exact:
            needed = await self._count(conversation, tools)
            if not self.check_token_limit(needed):
                raise ContextWindowExceededError(
                    self.get_limit_error_message(needed),
                    tokens=needed,
                    limit=self.max_input_tokens,
                    model=self.model,
                )
            return
        if chars < window:  # a token is at least a character, near enough: cannot be far over
            return
        needed = await self._count(conversation, tools)
        counter = await self._loaded_counter()
        calibrated = self.max_input_tokens is not None and (
            counter.exact or self.server_counts.ratio_of(tools=bool(tools)) is not None
        )
        margin = HOPELESS[not calibrated]
        if needed > window * margin:
            raise ContextWindowExceededError(
                f"The request needs about {needed:,} input tokens, more than {margin:g} times "
                f"the {window:,}-token context window of model '{self.model}': not sent. "
                "Shorten the task (or the files and outputs it carries), or use a model "
                "with a larger window (max_input_tokens).",
                tokens=needed,
                limit=window,
                model=self.model,
            )

    async def count_request_tokens(
        self,
        messages: Messages,
        system_msgs: Messages | None = None,
        tools: list[dict[str, Any]] | None = None,
    ) -> int:
        """Input tokens a request over these messages, system prompt and tools would take:
        an estimate is scaled to the server's counts once an answer reported them."""
        # Not through the requests' size keeper: compaction counts lists of its own.
        conversation = typed_all([*system_msgs, *messages] if system_msgs else messages)
        return await self._count(conversation, self._definitions(tools))

    async def _count(self, conversation: list[Message], tools: tuple[ToolDefinition, ...]) -> int:
        tokens = await self._own_count(conversation, tools)
        if (await self._loaded_counter()).exact:
            return tokens
        counts = self.server_counts
        await counts.settle(self._own_count)
        return counts.scale(tokens, tools=bool(tools))

    async def _own_count(
        self, conversation: Sequence[Message], tools: tuple[ToolDefinition, ...]
    ) -> int:
        """Our count of a request (unscaled): the wire model's own, else over our types."""
        counter = await self._loaded_counter()
        if self._wire_count is not None:
            return int(self._wire_count(conversation, tools, counter))
        from app.llm.counting import count_request  # only when counting: ~0.2 ms at start-up

        return count_request(counter, conversation, tools)

    def format_messages(
        self, messages: Messages, supports_images: bool | None = None
    ) -> list[dict[str, Any]]:
        """Upstream's view of ``messages``: plain dicts in OpenAI's chat shape, fresh ones
        the caller may change (images as content parts when the model takes them)."""
        allowed = supports_images
        if allowed is None:
            allowed = self.supports_images and "images" not in self.refused_features
        return upstream_dicts(messages, supports_images=allowed)

    @property
    def refused_features(self) -> frozenset[str]:
        """What this endpoint and model refused (``stream``, ``stream_tools``, ``tools``,
        ``images``)."""
        refusals = self._stack.refusals if self._stack is not None else None
        return refusals.features if refusals is not None else frozenset()

    @property
    def endpoint(self) -> Model:
        """The wire model under the wrappers (``OpenAIChatModel`` for an OpenAI-compatible
        profile); not there over ``from_model``."""
        if self._custom is not None or self._stack is None:
            raise AttributeError(f"{self!r} is over a model of its own, not an endpoint")
        return self._stack.wire

    @property
    def transport(self) -> Any:
        """The transport requests go through, for a wire model that has one (built from the
        profile on first use)."""
        return getattr(self.endpoint, "transport")  # noqa: B009  # an attribute of some models

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
        """One model turn that may call tools; the answer's text goes to ``on_delta`` as it
        arrives. ``stream=False`` sends it plain whatever the profile says; further keyword
        arguments are request fields (``seed``, ``stop``, ...)."""
        choice = tool_choice.value if isinstance(tool_choice, ToolChoice) else tool_choice
        if choice not in TOOL_CHOICE_VALUES:
            raise ValueError(f"Invalid tool_choice: {tool_choice!r}")
        conversation, chars = self._measured.measure(
            [*system_msgs, *messages] if system_msgs else messages
        )
        definitions = self._definitions(tools)
        window = self._window
        if window is not None and (chars >= window or self.settings.max_input_tokens):
            await self._check_window(conversation, definitions, chars)
        relay = DeltaRelay(on_delta) if on_delta is not None else None
        params = ModelParams(
            tools=definitions,
            tool_choice=choice,
            max_tokens=self._max_tokens,
            temperature=self._temperature if temperature is None else temperature,
            timeout=timeout or self.settings.timeout,
            on_delta=None if relay is None else relay.pass_on,
            stream=stream,
            extra=kwargs,
        )
        try:
            response = await self._model.request(conversation, params)
        except ContextWindowExceededError as e:
            response = await self._overflowed(e, conversation, definitions, params)
        if not isinstance(response, ModelResponse):
            raise TypeError(
                f"{type(self._custom).__name__}.request() returned {type(response).__name__}, "
                "not a ModelResponse"
            )
        if relay is not None and not relay.delivered:  # not streamed: the text in one piece
            await deliver(on_delta, response.message.content)
        usage = response.usage
        if usage.requests or usage.total_tokens:
            usage.requests = usage.requests or 1
            if usage.prompt_tokens > 0 and not usage.estimated:
                counts = self.server_counts
                # With a system prompt the conversation is a list made here: kept, not copied.
                if counts.answered(
                    conversation, definitions, usage.prompt_tokens, owned=bool(system_msgs)
                ):
                    await counts.save()
        else:  # the model reported none: estimate, and say so
            prompt = await self._count(conversation, definitions)  # the tools are prompt too
            completion = self.count_tokens(_produced_text(response.message))
            usage = response.usage = Usage(
                prompt_tokens=prompt,
                completion_tokens=completion,
                total_tokens=prompt + completion,
                requests=1,
                estimated=True,
            )
        self._record_usage(usage)
        return response

    async def _overflowed(
        self,
        error: ContextWindowExceededError,
        conversation: list[Message],
        tools: tuple[ToolDefinition, ...],
        params: ModelParams,
    ) -> ModelResponse:
        """A real overflow teaches the window and how the server counts, and is raised. One
        whose numbers contradict what was sent is a server fault: asked once more, and if
        it recurs raised as :class:`LLMServerError` (nothing learned from it)."""
        counter = await self._loaded_counter()
        sent = await self._own_count(conversation, tools)
        counts = self.server_counts
        if not counter.exact:
            await counts.settle(self._own_count)  # the answered request before this one
        with_tools = bool(tools)
        if why := counts.contradiction(error, sent, counter.exact, tools=with_tools):
            logger.warning(
                f"Model '{self.model}' answered with a context overflow that cannot be true of "
                f"the request ({why}): a server fault, asking once more"
            )
            try:
                return await self._model.request(conversation, params)
            except ContextWindowExceededError as again:
                error = again
            if why := counts.contradiction(error, sent, counter.exact, tools=with_tools):
                raise LLMServerError(
                    f"Model '{self.model}' answered twice with a context overflow that cannot "
                    f"be true of the request ({why}): {error.message}",
                    status_code=error.status_code,
                    model=self.model,
                ) from error
        counts.overflowed(error, sent, counter.exact, tools=with_tools)
        await counts.save()
        if error.limit and not self.max_input_tokens:
            self._learned_window = error.limit
        raise error

    def _definitions(self, tools: list[dict[str, Any]] | None) -> tuple[ToolDefinition, ...]:
        """The tools as definitions, the same tuple while they stay equal (reused encoding)."""
        if not tools:
            return ()
        cached = self._tools
        if cached is not None and cached[0] == tools:
            return cached[1]
        for tool in tools:
            if not isinstance(tool, dict) or "type" not in tool:
                raise ValueError("Each tool must be a dict with a 'type' field")
        copied = copy.deepcopy(tools)
        definitions = tuple(ToolDefinition.from_param(tool) for tool in copied)
        self._tools = (copy.deepcopy(tools), definitions)
        return definitions

    async def aclose(self) -> None:
        """Close the wire model's connections (optional: they are also released at exit)."""
        stack = self._stack
        wires = [*self._retired, stack.wire if stack is not None and self._custom is None else None]
        self._retired.clear()
        for wire in wires:
            close = getattr(wire, "aclose", None)  # optional for a model
            if close is not None:
                await close()

    async def ask(
        self,
        messages: Messages,
        system_msgs: Messages | None = None,
        stream: bool | None = None,
        temperature: float | None = None,
        **kwargs: Any,
    ) -> str:
        """A plain text answer; ``stream`` None leaves streaming to the profile."""
        response = await self.request(
            messages, system_msgs, temperature=temperature, stream=stream, **kwargs
        )
        text = response.message.content
        if not text:
            raise LLMResponseError(
                f"Model '{self.model}' returned an empty answer", model=self.model
            )
        return text

    async def ask_stream(
        self,
        messages: Messages,
        system_msgs: Messages | None = None,
        temperature: float | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[str]:
        """Yield the answer's text as it arrives (a retried stream does not repeat text)."""
        queue: asyncio.Queue[str | None] = asyncio.Queue()

        async def run() -> str:
            try:
                kwargs["on_delta"] = queue.put_nowait
                return await self.ask(messages, system_msgs, True, temperature, **kwargs)
            finally:
                queue.put_nowait(None)

        task = asyncio.ensure_future(run())
        try:
            while (piece := await queue.get()) is not None:
                yield piece
            await task
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def ask_with_images(
        self,
        messages: Messages,
        images: list[str | dict[str, Any]],
        system_msgs: Messages | None = None,
        stream: bool = False,
        temperature: float | None = None,
        **kwargs: Any,
    ) -> str:
        """Ask about images (URLs, data URLs or base64), attached to the last user message."""
        if not self.supports_images:
            raise ImagesNotSupportedError(
                f"Model '{self.model}' is not configured for images. Use an [llm.<name>] profile "
                "with a vision model, or set supports_images = true if this model accepts them.",
                model=self.model,
            )
        attached = attach_images(messages, images)
        return await self.ask(
            attached, system_msgs, stream=stream, temperature=temperature, **kwargs
        )

    async def ask_tool(
        self,
        messages: Messages,
        system_msgs: Messages | None = None,
        timeout: float | None = None,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: ToolChoice | str = ToolChoice.AUTO,
        temperature: float | None = None,
        on_delta: DeltaCallback | None = None,
        **kwargs: Any,
    ) -> Message:
        """The assistant ``Message`` of ``request()`` (upstream's API)."""
        response = await self.request(
            messages,
            system_msgs,
            timeout=timeout,
            tools=tools,
            tool_choice=tool_choice,
            temperature=temperature,
            on_delta=on_delta,
            **kwargs,
        )
        return response.message


def resolve_settings(config_name: str, llm_config: Any) -> LLMSettings:
    """Settings from an explicit ``llm_config`` or from the config file's profiles."""
    from app.config import config  # loads the config file: only when a profile is read

    if llm_config is None:
        profiles = config.llm
    elif isinstance(llm_config, LLMSettings):
        return llm_config
    elif isinstance(llm_config, dict) and "model" in llm_config:
        return LLMSettings(**llm_config)
    elif isinstance(llm_config, dict):
        profiles = llm_config
    else:
        raise TypeError(
            f"llm_config must be LLMSettings or a dict, not {type(llm_config).__name__}"
        )
    settings = profiles.get(config_name) or profiles.get("default")
    if settings is None:
        raise ValueError(f"No LLM profile named {config_name!r} and no 'default' profile")
    return settings if isinstance(settings, LLMSettings) else LLMSettings(**settings)


def model_argument(data: Any) -> Any:
    """The ``model=`` argument of agents and flows (a "before" validator): any :class:`Model`
    becomes their ``llm``."""
    if not isinstance(data, dict) or "model" not in data:
        return data
    data = dict(data)
    model = data.pop("model")
    if data.get("llm") is not None:
        raise ValueError("give either llm= or model=, not both")
    data["llm"] = model if isinstance(model, LLM) else LLM.from_model(model)
    return data


def _refuse_unknown(where: str, given: dict[str, Any], accepted: Sequence[str]) -> None:
    """A keyword argument nobody reads is a typo that would silently change nothing (the
    config file's endpoint used instead of the one meant): a ``TypeError`` naming it."""
    if unknown := sorted(set(given) - set(accepted)):
        raise TypeError(
            f"Unknown LLM setting(s) for {where}: {', '.join(unknown)}; "
            f"accepted: {', '.join(accepted)}"
        )


def _updated(settings: LLMSettings, changes: dict[str, Any]) -> LLMSettings:
    """``settings`` with ``changes``, checked as the config file's; what was never set stays
    unset (so it reaches a model of your own as None)."""
    kept = {name: getattr(settings, name) for name in settings.model_fields_set}
    return type(settings).model_validate({**kept, **changes})


def _produced_text(message: Message) -> str:
    """What the model wrote, tool calls included (for estimating unreported usage)."""
    text = message.content or ""
    for call in message.tool_calls or ():
        text += call.function.name + call.function.arguments
    return text
