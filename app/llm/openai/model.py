"""``OpenAIChatModel``: an OpenAI-compatible chat-completions endpoint as a :class:`Model`. The
body is the messages' cached JSON joined with the tools' and fields' (re-encoded only when
they change), sent through the transport ``connect`` makes.

With ``stream = "auto"`` a turn is streamed when someone watches its text or the endpoint is
slow (the first turn, and after one that took ``stream_after`` seconds): a fast endpoint gets
plain requests, cheaper for both ends. A plain request that timed out is hung up and retried
streamed, or plainly once only where it cannot stream (a server such as llama-cpp-python
finishes an abandoned plain answer before the retry: docs/local-models.md). A refusal to
stream is remembered (``Refusals``) and the turn asked again plainly.
"""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from app.exceptions import (
    ContextWindowExceededError,
    LLMBadRequestError,
    LLMError,
    LLMResponseError,
    LLMTimeoutError,
    ToolsNotSupportedError,
)
from app.llm.capabilities import model_flags
from app.llm.model import DeltaCallback, ModelParams, ModelResponse, ToolDefinition
from app.llm.openai.formatting import Formatted, prepare_messages
from app.llm.openai.messages import Completion, parse_completion
from app.llm.openai.streaming import DeltaRelay, ThinkFilter
from app.llm.openai.transport import (
    ChatRequest,
    NoStream,
    Transport,
    deliver,
    innermost,
)
from app.llm.openai.wire import dumps, encode_body
from app.llm.retry import with_retries
from app.llm.usage import Usage
from app.logger import logger
from app.schema import Message

if TYPE_CHECKING:
    from app.config import LLMSettings
    from app.llm.refusals import Refusals

#: Builds the request body, streamed (True) or plain (False).
BodyBuilder = Callable[[bool], bytes]

#: Types whose values cannot change in place (a cached encoding of them stays true).
_PLAIN = frozenset({str, int, float, bool, type(None)})


class OpenAIChatModel:
    """One endpoint and model of a profile (``settings``); what the endpoint refused is kept
    in ``refusals``. Messages may also be upstream's plain dicts (``ask_with_images`` sends
    content parts). Retries are here, not in a transport layer: they hold per-request state
    (a plain request that timed out is retried streamed)."""

    def __init__(
        self, settings: LLMSettings, refusals: Refusals, connect: Callable[[], Transport]
    ) -> None:
        self.name = settings.model
        self.settings = settings
        self.refusals = refusals
        self._connect = connect
        self._layers: Transport | None = None
        self._slots = asyncio.Semaphore(settings.max_concurrent_requests)
        self._slots_loop: asyncio.AbstractEventLoop | None = None
        #: Seconds the last request took (None before the first one).
        self.last_seconds: float | None = None
        self.is_reasoning_model, self.supports_images = model_flags(settings)
        self._tools_cache: tuple[Sequence[ToolDefinition], bytes] | None = None
        self._fields_cache: tuple[dict[str, Any], tuple[type, ...], bytes] | None = None
        self._warned_images = False
        #: (feature, why, plain body) of a turn whose empty stream may have been an overflow.
        self._unresolved: tuple[str, str, bytes] | None = None

    @property
    def layers(self) -> Transport:
        """The transport with its layers, that requests go through (made on first use)."""
        if self._layers is None:
            self._layers = self._connect()
        return self._layers

    @property
    def transport(self) -> Transport:
        """The transport under the layers, that reaches the endpoint."""
        return innermost(self.layers)

    async def aclose(self) -> None:
        if self._layers is not None:
            await self._layers.aclose()

    def images_allowed(self) -> bool:
        return self.supports_images and "images" not in self.refusals.features

    def prepare(self, messages: Sequence[Message | dict[str, Any]]) -> Formatted:
        """The messages in wire format (the leading system prompt apart, so the conversation's
        first message keeps the cached formatting of the previous request)."""
        split = 0
        for message in messages:
            role = message.role if isinstance(message, Message) else message.get("role")
            if role != "system":
                break
            split += 1
        formatted = prepare_messages(
            messages[split:] if split else messages,
            system=messages[:split] if split else None,
            supports_images=self.images_allowed(),
            model=self.name,
        )
        self.warn_omitted(formatted.omitted)
        return formatted

    def warn_omitted(self, omitted: int) -> None:
        """Say once that images were left out for a model not configured for them."""
        if omitted and not self._warned_images:
            self._warned_images = True
            logger.warning(
                f"Model '{self.name}' is not configured for images; {omitted} image(s) were "
                "replaced by a note. Set supports_images = true in its [llm] section if it "
                "accepts them."
            )

    async def request(
        self, messages: Sequence[Message | dict[str, Any]], params: ModelParams
    ) -> ModelResponse:
        formatted = self.prepare(messages)
        fields: dict[str, Any] = {"model": self.name}
        max_tokens = self.settings.max_tokens if params.max_tokens is None else params.max_tokens
        if self.is_reasoning_model:
            fields["max_completion_tokens"] = max_tokens
        else:
            fields["max_tokens"] = max_tokens
            fields["temperature"] = (
                self.settings.temperature if params.temperature is None else params.temperature
            )
        fields.update(params.extra)
        fields.pop("messages", None)
        fields.pop("tools", None)
        tools = self._tools_json(params.tools) if params.tools else None
        if tools is not None:
            fields["tool_choice"] = params.tool_choice

        def build(stream: bool) -> bytes:
            body = {**fields, "stream": True, "stream_options": {"include_usage": True}}
            return encode_body(
                formatted.fragments, self._fields_json(body if stream else fields), tools
            )

        relay = DeltaRelay(params.on_delta) if params.on_delta is not None else None
        completion = await self._exchange(
            build,
            tools=tools is not None,
            timeout=params.timeout or self.settings.timeout,
            relay=relay,
            stream=params.stream,
        )
        message = completion.message
        if completion.finish_reason == "length" and not message.tool_calls:
            logger.warning(f"The answer of model '{self.name}' was cut at max_tokens={max_tokens}")
        return ModelResponse(
            message=message,
            usage=Usage.from_api(completion.usage) or Usage(),
            finish_reason=completion.finish_reason,
            reasoning=completion.reasoning,
        )

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

    def _tools_json(self, tools: Sequence[ToolDefinition]) -> bytes:
        """The tool definitions' JSON, re-encoded only when they change (an agent offers the
        same tools at every step; comparing them is far cheaper than encoding them)."""
        cached = self._tools_cache
        if cached is not None and (cached[0] is tools or cached[0] == tools):
            return cached[1]
        encoded = dumps([tool.to_param() for tool in tools])
        self._tools_cache = (copy.deepcopy(tools), encoded)
        return encoded

    def streams(self, *, tools: bool, watched: bool, asked: bool | None = None) -> bool:
        """Whether this turn is streamed: as ``asked`` by the caller, else as the profile says
        (its ``false`` always wins)."""
        mode = self.settings.stream
        if asked is False or not self.refusals.may_stream(tools=tools, allowed=mode is not False):
            return False
        if asked is None and mode == "auto" and not watched:
            return self.last_seconds is None or self.last_seconds >= self.settings.stream_after
        return True

    def _slots_here(self) -> asyncio.Semaphore:
        """The in-flight bound, one per event loop (a semaphore is bound to its loop)."""
        loop = asyncio.get_running_loop()
        if self._slots_loop is not loop:
            self._slots = asyncio.Semaphore(self.settings.max_concurrent_requests)
            self._slots_loop = loop
        return self._slots

    async def _send(
        self,
        build: BodyBuilder,
        *,
        stream: bool,
        timeout: float,
        relay: DeltaRelay | None,
        upgrade: bool = False,
    ) -> Completion:
        """One request, retried on transient failures (a malformed reply too); streamed text
        goes through ``relay``. With ``upgrade``, a plain attempt that timed out is retried
        streamed; one that cannot be is retried plainly once only (the server may still be
        generating the abandoned answer, and every retry would queue behind it)."""
        model = self.settings.model
        body = build(stream)
        upgraded = False
        plain_timeouts = 0

        async def attempt() -> Completion:
            nonlocal stream, body, upgraded, plain_timeouts
            on_delta: DeltaCallback | None = None
            if relay is not None and stream:
                relay.attempt()
                think = ThinkFilter()

                async def on_delta(piece: str) -> None:
                    await deliver(relay.target, relay.new_text(think.feed(piece)))

            request = ChatRequest(body, stream, timeout, model, on_delta)
            start = time.monotonic()
            try:
                async with self._slots_here():
                    data = await self.layers.send(request)
            except LLMTimeoutError:
                if upgrade and not stream:
                    stream, body, upgraded = True, build(True), True
                elif not stream:
                    plain_timeouts += 1
                raise
            except NoStream as e:
                if not upgraded:  # the caller handles a refused first stream
                    raise
                stream, body, upgraded = False, build(False), False
                if e.data is None:
                    raise LLMResponseError(e.why, model=model) from e
                data = e.data
            finally:
                self.last_seconds = time.monotonic() - start
            return parse_completion(data, model)

        def give_up(error: Exception) -> bool:
            if isinstance(error, LLMTimeoutError) and plain_timeouts > 1:
                logger.warning(
                    f"Model '{model}' timed out twice on a plain request; not asking again: "
                    "the server may still be generating the answers left behind"
                )
                return True
            return False

        return await with_retries(
            attempt, max_retries=self.settings.max_retries, settings=self.settings, give_up=give_up
        )

    async def _exchange(
        self,
        build: BodyBuilder,
        *,
        tools: bool,
        timeout: float,
        relay: DeltaRelay | None,
        stream: bool | None,
    ) -> Completion:
        """The completion for one turn; a refusal to stream is remembered and the turn asked
        again plainly."""
        model = self.settings.model
        pending: tuple[str, str] | None = None
        feature = "stream_tools" if tools else "stream"
        unresolved, self._unresolved = self._unresolved, None
        if unresolved is not None and unresolved[0] == feature and unresolved[2] == build(False):
            # The same turn asked again after an empty stream and an overflow: only a caller
            # that judged the overflow false does that (llama-cpp-python's runaway tool
            # arguments), so the empty stream was the refusal; a second streamed probe would
            # cost the server another prompt evaluation.
            await self.refusals.refuse(unresolved[0], unresolved[1])
        elif self.streams(tools=tools, watched=relay is not None, asked=stream):
            try:
                return await self._send(build, stream=True, timeout=timeout, relay=relay)
            except NoStream as e:
                if e.data is None:
                    # Ambiguous (llama.cpp also answers an overflow so): a refusal only
                    # once the same turn succeeds unstreamed.
                    pending = (feature, e.why)
                else:
                    await self.refusals.refuse(feature, e.why)
                    try:
                        return parse_completion(e.data, model)
                    except LLMResponseError as bad:  # asked again plainly, with retries
                        logger.warning(f"{bad}; asking again")
            except LLMBadRequestError as e:
                if (
                    isinstance(e, ContextWindowExceededError | ToolsNotSupportedError)
                    or "stream" not in e.message.lower()
                ):
                    raise
                await self.refusals.refuse(feature, e.message)
        upgrade = (
            stream is None
            and pending is None
            and self.settings.stream == "auto"
            and self.refusals.may_stream(tools=tools, allowed=True)
        )
        try:
            completion = await self._send(
                build, stream=False, timeout=timeout, relay=None, upgrade=upgrade
            )
        except ContextWindowExceededError:
            if pending is not None:  # an overflow explains the empty stream too: not yet known
                self._unresolved = (*pending, build(False))
            raise
        except LLMError as e:
            # The server took the plain request (it answered, or kept generating): the empty
            # stream was no overflow, so it was the refusal.
            answered = isinstance(e, LLMTimeoutError) or e.status_code is not None
            if pending is not None and pending[0] == "stream_tools" and answered:
                await self.refusals.refuse(*pending)
            raise
        if pending is not None:
            await self.refusals.refuse(*pending)
        return completion
