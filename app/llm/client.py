"""``LLM``: the one place requests to the model are built, sent, retried and accounted for.

Requests skip ``chat.completions.create``, whose per-call parameter processing costs tens of
milliseconds per step on long histories. The body is built from JSON encoded once per message
(``app.llm.formatting``, ``app.llm.wire``) and sent on the SDK client's own connection pool,
with its auth and its error types (``app.llm.transport``; Azure and streams use the SDK's
``post``). The openai package is imported on the first request, not before.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import quote

from app.exceptions import (
    ContextWindowExceededError,
    ImagesNotSupportedError,
    LLMConnectionError,
    LLMError,
    LLMResponseError,
)
from app.llm.capabilities import default_reasoning_model, default_supports_images
from app.llm.context import request_gate, usage_sink
from app.llm.errors import translate_error
from app.llm.model import ModelResponse
from app.llm.messages import (
    Formatted,
    format_messages,
    image_part,
    message_from_response,
    prepare_messages,
)
from app.llm.pricing import cost_of, price_for
from app.llm.recording import active_tape
from app.llm.retry import with_retries
from app.llm.transport import ChatTransport, fast_transport
from app.llm.usage import Usage
from app.llm.wire import count_tokens, dumps, encode_body
from app.logger import logger, register_secret
from app.schema import TOOL_CHOICE_VALUES, Message, ToolChoice

if TYPE_CHECKING:
    from app.config import LLMSettings
    from app.llm.streaming import DeltaCallback
    from app.tokens import TokenCounter

__all__ = ["LLM"]

class LLM:
    """A chat model behind an OpenAI-compatible endpoint (OpenAI, Azure, Ollama, vLLM, ...).

    ``LLM(config_name)`` returns one shared instance per config name, as upstream does;
    ``LLM.create(...)`` builds an independent one (for libraries and tests).
    """

    _instances: ClassVar[dict[str, LLM]] = {}

    def __new__(
        cls, config_name: str = "default", llm_config: Any = None, **kwargs: Any
    ) -> LLM:
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
            self._setup(config_name, _resolve_settings(config_name, llm_config))
        except BaseException:
            type(self)._instances.pop(config_name, None)
            raise
        self._initialized = True

    @classmethod
    def create(
        cls, config_name: str = "default", llm_config: Any = None, **overrides: Any
    ) -> LLM:
        """An independent instance, not shared and not registered as the singleton.

        ``llm_config`` may be an ``LLMSettings``, a dict of settings, or a dict of profiles;
        ``overrides`` replace individual settings (e.g. ``base_url=...``).
        """
        instance = super().__new__(cls)
        settings = _resolve_settings(config_name, llm_config)
        if overrides:
            settings = settings.model_copy(update=overrides)
        instance._setup(config_name, settings)
        instance._initialized = True
        return instance

    @classmethod
    def reset_instances(cls) -> None:
        """Forget the shared instances (after the config changed, and in tests)."""
        cls._instances.clear()

    def _setup(self, config_name: str, settings: LLMSettings) -> None:
        self.config_name = config_name
        self.settings = settings
        self.model: str = settings.model
        self.max_tokens: int = settings.max_tokens
        self.temperature: float = settings.temperature
        self.api_type: str = settings.api_type
        self.api_key: str | None = settings.api_key
        register_secret(self.api_key)  # also for settings built in code, not loaded from a file
        self.api_version: str = settings.api_version
        self.base_url: str = settings.base_url
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
        self.last_usage: Usage | None = None
        self._client: Any = None
        self._client_loop: asyncio.AbstractEventLoop | None = None
        self._transport: ChatTransport | None = None
        self._tools_cache: tuple[Any, bytes] | None = None
        self._slots = asyncio.Semaphore(settings.max_concurrent_requests)
        self._counter: TokenCounter | None = None
        self._warned_images = False
        #: Set once the endpoint refused a streamed request; later turns are not streamed.
        self.streams_refused = False

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
        logger.debug(f"LLM usage: {usage} | cumulative: {self.usage}")

    # ---- token counting ----------------------------------------------------------------------

    @property
    def token_counter(self) -> TokenCounter:
        if self._counter is None:
            from app.tokens import TokenCounter

            self._counter = TokenCounter(self.model)
        return self._counter

    async def _loaded_counter(self) -> TokenCounter:
        """The counter, loaded off the event loop the first time (loading may read files or
        wait on a download)."""
        counter = self.token_counter
        if not counter.loaded:
            await asyncio.to_thread(counter.load)
        return counter

    def count_tokens(self, text: str) -> int:
        return self.token_counter.count_text(text) if text else 0

    def count_message_tokens(self, messages: list[dict[str, Any]]) -> int:
        return self.token_counter.count_messages(messages)

    def check_token_limit(self, input_tokens: int) -> bool:
        """True when ``input_tokens`` fits the per-request window (``max_input_tokens``)."""
        return self.max_input_tokens is None or input_tokens <= self.max_input_tokens

    def get_limit_error_message(self, input_tokens: int) -> str:
        return (
            f"The request needs about {input_tokens} input tokens, more than max_input_tokens="
            f"{self.max_input_tokens} for model '{self.model}'."
        )

    async def _check_window(
        self, formatted: Formatted, tools: list[dict[str, Any]] | None
    ) -> None:
        if self.max_input_tokens is None:
            return
        counter = await self._loaded_counter()
        needed = count_tokens(counter, formatted.messages, formatted.entries)
        needed += counter.count_tools(tools)
        if not self.check_token_limit(needed):
            raise ContextWindowExceededError(
                self.get_limit_error_message(needed),
                tokens=needed,
                limit=self.max_input_tokens,
                model=self.model,
            )

    # ---- message formatting --------------------------------------------------------------------

    def format_messages(
        self, messages: list[Message | dict[str, Any]], supports_images: bool | None = None
    ) -> list[dict[str, Any]]:
        """Wire-format messages (upstream's name); images follow this model's abilities.

        Returns fresh dicts the caller may change.
        """
        allowed = self.supports_images if supports_images is None else supports_images
        formatted, omitted = format_messages(messages, supports_images=allowed, model=self.model)
        self._warn_omitted(omitted)
        return formatted

    def _warn_omitted(self, omitted: int) -> None:
        if omitted and not self._warned_images:
            self._warned_images = True
            logger.warning(
                f"Model '{self.model}' is not configured for images; {omitted} image(s) were "
                "replaced by a note. Set supports_images = true in its [llm] section if it "
                "accepts them."
            )

    def _prepare(
        self,
        messages: list[Message | dict[str, Any]],
        system_msgs: list[Message | dict[str, Any]] | None,
    ) -> Formatted:
        formatted = prepare_messages(
            messages, system=system_msgs, supports_images=self.supports_images, model=self.model
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
        return encode_body(formatted.fragments, body, self._tools_json(tools))

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

    # ---- transport -----------------------------------------------------------------------------

    def _get_client(self) -> Any:
        """The SDK client, one per event loop (a connection pool cannot outlive its loop)."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            import openai

            key = self.api_key or "no-key-configured"
            if self.api_type == "azure":
                self._client = openai.AsyncAzureOpenAI(
                    api_key=key,
                    api_version=self.api_version,
                    azure_endpoint=self.base_url,
                    max_retries=0,
                    timeout=self.timeout,
                )
            else:
                self._client = openai.AsyncOpenAI(
                    api_key=key, base_url=self.base_url, max_retries=0, timeout=self.timeout
                )
            self._client_loop = loop
            self._transport = fast_transport(self._client, self._chat_path(self._client))
            self._slots = asyncio.Semaphore(self.settings.max_concurrent_requests)
        return self._client

    def _chat_path(self, client: Any) -> str:
        """The endpoint path. Azure wants the deployment in it; its client would read the
        model from a dict body, but ours is ready-made JSON, so the path is built here."""
        if self.api_type == "azure" and "/deployments" not in str(client.base_url.path):
            return f"/deployments/{quote(self.model, safe='')}/chat/completions"
        return "/chat/completions"

    async def _post(self, body: bytes, *, timeout: float | None, stream: bool) -> Any:
        """One HTTP attempt; SDK errors come out as our types.

        At most ``max_concurrent_requests`` attempts of this LLM are on the wire at once.
        A recording or replay (``app.llm.recording``) sees every non-streamed exchange.
        """
        tape = active_tape.get()
        if tape is not None and not stream:
            return await tape.exchange(self, body, lambda: self._post_http(body, timeout, False))
        return await self._post_http(body, timeout, stream)

    async def _post_http(self, body: bytes, timeout: float | None, stream: bool) -> Any:
        import openai

        gate = request_gate.get()
        if gate is not None:  # e.g. the batch runner's shared rate limit
            await gate()

        client = self._get_client()
        transport = self._transport
        path = self._chat_path(client)
        options = {"security": {"bearer_auth": True}, "timeout": timeout or self.timeout}
        try:
            async with self._slots:
                if stream:
                    from openai import AsyncStream
                    from openai.types.chat import ChatCompletionChunk

                    return await client.post(
                        path,
                        content=body,
                        cast_to=ChatCompletionChunk,
                        options=options,
                        stream=True,
                        stream_cls=AsyncStream[ChatCompletionChunk],
                    )
                if transport is not None:
                    raw = await transport.post(body, timeout or self.timeout)
                else:
                    raw = await client.post(path, content=body, cast_to=bytes, options=options)
        except openai.OpenAIError as e:
            raise translate_error(e, model=self.model, base_url=self.base_url) from e
        return self._decode(raw)

    def _decode(self, raw: bytes) -> Any:
        try:
            return json.loads(raw)
        except ValueError as e:
            raise LLMResponseError(
                f"Model '{self.model}' ({self.base_url}) answered with invalid JSON: "
                f"{raw[:200]!r}",
                model=self.model,
            ) from e

    async def _with_retries(self, attempt: Callable[[], Any]) -> Any:
        """``attempt`` again on transient failures only (see ``app.llm.retry``)."""
        return await with_retries(attempt, max_retries=self.max_retries, settings=self.settings)

    async def _usage_from(self, data: dict[str, Any], formatted: Formatted, text: str) -> Usage:
        usage = Usage.from_api(data.get("usage"))
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

    # ---- public API ----------------------------------------------------------------------------

    async def ask(
        self,
        messages: list[Message | dict[str, Any]],
        system_msgs: list[Message | dict[str, Any]] | None = None,
        stream: bool = True,
        temperature: float | None = None,
        **kwargs: Any,
    ) -> str:
        """A plain text answer. With ``stream`` the reply is read as it is generated."""
        formatted = self._prepare(messages, system_msgs)
        await self._check_window(formatted, None)
        timeout = kwargs.pop("timeout", None)
        stream = stream and active_tape.get() is None  # a tape records whole answers
        body = self._body(formatted, temperature=temperature, stream=stream, extra=kwargs)
        if stream:
            text = await self._with_retries(lambda: self._stream_text(body, formatted, timeout))
        else:
            data = await self._with_retries(lambda: self._post(body, timeout=timeout,
                                                               stream=False))
            message = self._first_message(data)
            text = message.content or ""
            await self._usage_from(data, formatted, text)
        if not text:
            raise LLMResponseError(f"Model '{self.model}' returned an empty answer",
                                   model=self.model)
        return text

    async def ask_stream(
        self,
        messages: list[Message | dict[str, Any]],
        system_msgs: list[Message | dict[str, Any]] | None = None,
        temperature: float | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[str]:
        """Yield the answer's text as it arrives (no retry once text has been yielded)."""
        if active_tape.get() is not None:  # recorded or replayed: the whole answer at once
            yield await self.ask(messages, system_msgs, stream=False, temperature=temperature,
                                 **kwargs)
            return
        formatted = self._prepare(messages, system_msgs)
        await self._check_window(formatted, None)
        timeout = kwargs.pop("timeout", None)
        body = self._body(formatted, temperature=temperature, stream=True, extra=kwargs)
        stream = await self._with_retries(lambda: self._post(body, timeout=timeout, stream=True))
        async for delta in self._deltas(stream, formatted):
            yield delta

    async def _stream_text(
        self, body: bytes, formatted: Formatted, timeout: float | None
    ) -> str:
        stream = await self._post(body, timeout=timeout, stream=True)
        return "".join([delta async for delta in self._deltas(stream, formatted)])

    async def _deltas(self, stream: Any, formatted: Formatted) -> AsyncIterator[str]:
        """The text deltas of an SSE stream; usage is recorded once the stream ends."""
        parts: list[str] = []
        usage_data: dict[str, Any] | None = None
        try:
            async for chunk in stream:
                if chunk.usage is not None:
                    usage_data = chunk.usage.model_dump()
                for choice in chunk.choices or []:
                    delta = choice.delta.content if choice.delta else None
                    if delta:
                        parts.append(delta)
                        yield delta
        except Exception as e:
            raise _stream_error(e, self) from e
        await self._usage_from({"usage": usage_data}, formatted, "".join(parts))

    async def ask_with_images(
        self,
        messages: list[Message | dict[str, Any]],
        images: list[str | dict[str, Any]],
        system_msgs: list[Message | dict[str, Any]] | None = None,
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
        if not images:
            raise ValueError("ask_with_images needs at least one image")
        dicts = [m.to_dict() if isinstance(m, Message) else dict(m) for m in messages]
        if not dicts or dicts[-1].get("role") != "user":
            raise ValueError("The last message must be a user message to attach images to")
        last = dicts[-1]
        content = last.get("content")
        parts: list[dict[str, Any]] = (
            [{"type": "text", "text": content}] if isinstance(content, str) and content
            else list(content or [])
        )
        for image in images:
            if isinstance(image, dict):
                url = image.get("url") or (image.get("image_url") or {}).get("url")
                parts.append(image_part(url, image.get("detail")))
            else:
                parts.append(image_part(image))
        last["content"] = parts
        return await self.ask(dicts, system_msgs, stream=stream, temperature=temperature,
                              **kwargs)

    async def ask_tool(
        self,
        messages: list[Message | dict[str, Any]],
        system_msgs: list[Message | dict[str, Any]] | None = None,
        timeout: float | None = None,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: ToolChoice | str = ToolChoice.AUTO,
        temperature: float | None = None,
        on_delta: DeltaCallback | None = None,
        **kwargs: Any,
    ) -> Message:
        """One model turn that may call tools; returns the assistant ``Message`` (upstream's
        API). ``request()`` returns the whole ``ModelResponse`` (usage, finish reason)."""
        response = await self.request(
            messages, system_msgs, timeout=timeout, tools=tools, tool_choice=tool_choice,
            temperature=temperature, on_delta=on_delta, **kwargs,
        )
        return response.message

    async def request(
        self,
        messages: list[Message | dict[str, Any]],
        system_msgs: list[Message | dict[str, Any]] | None = None,
        *,
        timeout: float | None = None,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: ToolChoice | str = ToolChoice.AUTO,
        temperature: float | None = None,
        on_delta: DeltaCallback | None = None,
        **kwargs: Any,
    ) -> ModelResponse:
        """One model turn that may call tools.

        ``tool_calls`` carry normalized JSON-text arguments (dicts and double-encoded JSON from
        lenient servers are decoded); malformed text is kept verbatim for the agent to report.
        With ``on_delta`` the answer is streamed (when the profile's ``stream`` allows and the
        endpoint supports it) and each piece of text is handed to it as it arrives.
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
        extra = dict(kwargs)
        if tools:
            extra["tools"] = tools
            extra["tool_choice"] = choice
        if on_delta is not None and self.settings.stream:
            from app.llm.streaming import streamed_turn

            data = await streamed_turn(self, formatted, temperature=temperature, extra=extra,
                                       timeout=timeout, on_delta=on_delta)
        else:
            body = self._body(formatted, temperature=temperature, stream=False, extra=extra)
            data = await self._with_retries(
                lambda: self._post(body, timeout=timeout, stream=False)
            )
        message = self._first_message(data)
        usage = await self._usage_from(data, formatted, _produced_text(message))
        finish = None
        try:
            finish = data["choices"][0].get("finish_reason")
        except (KeyError, IndexError, TypeError, AttributeError):
            pass
        return ModelResponse(message=message, usage=usage,
                             finish_reason=finish if isinstance(finish, str) else None)

    async def count_request_tokens(
        self,
        messages: list[Message | dict[str, Any]],
        system_msgs: list[Message | dict[str, Any]] | None = None,
        tools: list[dict[str, Any]] | None = None,
    ) -> int:
        """Input tokens a request over these messages, system prompt and tools would take."""
        formatted = self._prepare(messages, system_msgs)
        counter = await self._loaded_counter()
        return count_tokens(counter, formatted.messages, formatted.entries) \
            + counter.count_tools(tools)

    def _first_message(self, data: Any) -> Message:
        try:
            choice = data["choices"][0]
            raw = choice["message"]
        except (KeyError, IndexError, TypeError) as e:
            detail = data.get("error") if isinstance(data, dict) else None
            raise LLMResponseError(
                f"Model '{self.model}' returned no choices"
                + (f": {detail}" if detail else f" (got {str(data)[:200]})"),
                model=self.model,
            ) from e
        if choice.get("finish_reason") == "length" and not raw.get("tool_calls"):
            logger.warning(
                f"The answer of model '{self.model}' was cut at max_tokens={self.max_tokens}"
            )
        return message_from_response(raw)

    async def aclose(self) -> None:
        """Close the HTTP connection pool (optional: it is also released at exit)."""
        client, self._client = self._client, None
        self._transport = None
        if client is not None and self._client_loop is asyncio.get_running_loop():
            await client.close()


def _produced_text(message: Message) -> str:
    """What the model wrote, tool calls included (for estimating unreported usage)."""
    text = message.content or ""
    for call in message.tool_calls or ():
        text += call.function.name + call.function.arguments
    return text


def _stream_error(error: Exception, llm: LLM) -> LLMError:
    import openai

    if isinstance(error, LLMError):
        return error
    if isinstance(error, openai.OpenAIError):
        return translate_error(error, model=llm.model, base_url=llm.base_url)
    if type(error).__module__.startswith(("httpx", "httpcore", "anyio")):
        return LLMConnectionError(
            f"The connection to model '{llm.model}' broke mid-stream: {error}", model=llm.model
        )
    return LLMResponseError(f"The stream from model '{llm.model}' broke: {error}", model=llm.model)


def _resolve_settings(config_name: str, llm_config: Any) -> LLMSettings:
    """Settings from an explicit ``llm_config`` or from the config file's profiles."""
    from app.config import LLMSettings, config

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
