"""``OpenAIChatModel``: an OpenAI-compatible chat-completions endpoint as a :class:`Model`. The
body is the messages' cached JSON joined with the tools' and fields' (re-encoded only when
they change), sent through the transport ``connect`` makes.

With ``stream = "auto"`` a turn is streamed when someone watches its text or the endpoint is
slow (the first turn, and after one that took ``stream_after`` seconds): a fast endpoint gets
plain requests, cheaper for both ends. A plain request that timed out is hung up and retried
streamed, or plainly once only where it cannot stream (a server such as llama-cpp-python
finishes an abandoned plain answer before the retry: docs/local-models.md). A refusal to
stream is remembered (``Refusals``) and the turn asked again plainly, in the same attempt.

Each ``request`` is one attempt: the retries are the ``Retrying`` wrapper's. What one attempt
teaches the next (the timed-out plain request, the ambiguous empty stream) is kept per
request in ``params.attempt`` (:class:`_Turn`).
"""

from __future__ import annotations

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
from app.llm.deltas import deliver
from app.llm.model import DeltaCallback, ModelParams, ModelResponse, ToolDefinition
from app.llm.openai.formatting import Formatted, prepare_messages
from app.llm.openai.messages import Completion, parse_completion
from app.llm.openai.streaming import ThinkFilter
from app.llm.openai.transport import ChatRequest, NoStream, Transport
from app.llm.openai.wire import count_tokens, dumps, encode_body
from app.llm.usage import Usage
from app.logger import logger
from app.schema import Message

if TYPE_CHECKING:
    from app.config import LLMSettings
    from app.llm.refusals import Refusals
    from app.tokens import TokenCounter

#: Builds the request body, streamed (True) or plain (False).
BodyBuilder = Callable[[bool], bytes]

#: Types whose values cannot change in place (a cached encoding of them stays true).
_PLAIN = frozenset({str, int, float, bool, type(None)})


class _Turn:
    """One request across its attempts: its body (built once per form), whether the next
    attempt streams, and what the last ones showed. (A plain class: no dataclass to build at
    start-up.)"""

    __slots__ = (
        "bodies",
        "build",
        "feature",
        "on_delta",
        "pending",
        "plain_timeouts",
        "stream",
        "timeout",
        "upgrade",
        "upgraded",
    )

    def __init__(
        self, build: BodyBuilder, feature: str, timeout: float, on_delta: DeltaCallback | None
    ) -> None:
        self.build = build
        self.feature = feature  # "stream_tools" or "stream": what a refused stream refuses
        self.timeout = timeout
        self.on_delta = on_delta
        self.stream = False
        #: A plain attempt that times out is retried streamed (``stream = "auto"``).
        self.upgrade = False
        #: This streamed attempt is such a retry.
        self.upgraded = False
        self.plain_timeouts = 0
        #: (feature, why) of an empty stream: a refusal once the plain request is taken.
        self.pending: tuple[str, str] | None = None
        self.bodies: dict[bool, bytes] = {}

    def body(self, stream: bool) -> bytes:
        body = self.bodies.get(stream)
        if body is None:
            body = self.bodies[stream] = self.build(stream)
        return body


class OpenAIChatModel:
    """One endpoint and model of a profile (``settings``); what the endpoint refused is kept
    in ``refusals``."""

    def __init__(
        self, settings: LLMSettings, refusals: Refusals, connect: Callable[[], Transport]
    ) -> None:
        self.name = settings.model
        self.settings = settings
        self.refusals = refusals
        self._connect = connect
        self._transport: Transport | None = None
        #: Seconds the last request took (None before the first one).
        self.last_seconds: float | None = None
        self.is_reasoning_model, self.supports_images = model_flags(settings)
        self._tools_cache: tuple[Sequence[ToolDefinition], bytes] | None = None
        self._fields_cache: tuple[dict[str, Any], tuple[type, ...], bytes] | None = None
        self._warned_images = False
        #: (feature, why, plain body) of a turn whose empty stream may have been an overflow.
        self._unresolved: tuple[str, str, bytes] | None = None

    @property
    def transport(self) -> Transport:
        """The transport that reaches the endpoint (made on first use)."""
        if self._transport is None:
            self._transport = self._connect()
        return self._transport

    async def aclose(self) -> None:
        if self._transport is not None:
            await self._transport.aclose()

    def images_allowed(self) -> bool:
        return self.supports_images and "images" not in self.refusals.features

    def prepare(self, messages: Sequence[Message]) -> Formatted:
        """The messages in wire format (the leading system prompt apart, so the conversation's
        first message keeps the cached formatting of the previous request)."""
        split = 0
        for message in messages:
            if message.role != "system":
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

    def count_tokens(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition], counter: TokenCounter
    ) -> int:
        """Input tokens of the request as it goes on the wire; each cached message is
        tokenized once per encoding (``CountsTokens``)."""
        formatted = self.prepare(messages)
        tokens = count_tokens(counter, formatted.messages, formatted.entries)
        return tokens + counter.count_tools([tool.to_param() for tool in tools] if tools else None)

    def warn_omitted(self, omitted: int) -> None:
        """Say once that images were left out for a model not configured for them."""
        if omitted and not self._warned_images:
            self._warned_images = True
            logger.warning(
                f"Model '{self.name}' is not configured for images; {omitted} image(s) were "
                "replaced by a note. Set supports_images = true in its [llm] section if it "
                "accepts them."
            )

    async def request(self, messages: Sequence[Message], params: ModelParams) -> ModelResponse:
        attempt = params.attempt
        turn = attempt.memo.get(self) if attempt is not None else None
        if not isinstance(turn, _Turn):
            turn = await self._start(messages, params)
            if attempt is not None:
                attempt.memo[self] = turn
        completion = await self._attempt(turn, params)
        message = completion.message
        if completion.finish_reason == "length" and not message.tool_calls:
            limit = self.settings.max_tokens if params.max_tokens is None else params.max_tokens
            logger.warning(f"The answer of model '{self.name}' was cut at max_tokens={limit}")
        return ModelResponse(
            message=message,
            usage=Usage.from_api(completion.usage) or Usage(),
            finish_reason=completion.finish_reason,
            reasoning=completion.reasoning,
        )

    async def _start(self, messages: Sequence[Message], params: ModelParams) -> _Turn:
        """The request's body and how its first attempt is sent."""
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

        turn = _Turn(
            build,
            "stream_tools" if tools is not None else "stream",
            params.timeout or self.settings.timeout,
            params.on_delta,
        )
        unresolved, self._unresolved = self._unresolved, None
        if (
            unresolved is not None
            and unresolved[0] == turn.feature
            and unresolved[2] == turn.body(False)
        ):
            # The same turn asked again after an empty stream and an overflow: only a caller
            # that judged the overflow false does that (llama-cpp-python's runaway tool
            # arguments), so the empty stream was the refusal; a second streamed probe would
            # cost the server another prompt evaluation.
            await self.refusals.refuse(unresolved[0], unresolved[1])
        elif self.streams(
            tools=tools is not None, watched=turn.on_delta is not None, asked=params.stream
        ):
            turn.stream = True
        else:
            turn.upgrade = (
                params.stream is None and self.settings.stream == "auto" and self._may_upgrade(turn)
            )
        return turn

    def _may_upgrade(self, turn: _Turn) -> bool:
        """Whether a plain attempt that times out may be retried streamed."""
        tools = turn.feature == "stream_tools"
        return self.settings.stream == "auto" and self.refusals.may_stream(
            tools=tools, allowed=True
        )

    async def _attempt(self, turn: _Turn, params: ModelParams) -> Completion:
        """One attempt: streamed or plain as ``turn`` says; a refused stream is remembered
        and the turn asked plainly at once."""
        if not turn.stream:
            return await self._plain(turn, params)
        try:
            return await self._send(turn, stream=True)
        except NoStream as e:
            if turn.upgraded:  # a streamed retry of a timed-out plain request, answered plainly
                turn.stream = turn.upgraded = False
                if e.data is None:
                    raise LLMResponseError(e.why, model=self.name) from e
                return parse_completion(e.data, self.name)
            turn.stream = False
            if e.data is None:
                # Ambiguous (llama.cpp also answers an overflow so): a refusal only once the
                # same turn is taken unstreamed.
                turn.pending = (turn.feature, e.why)
            else:
                await self.refusals.refuse(turn.feature, e.why)
                try:
                    return parse_completion(e.data, self.name)
                except LLMResponseError as bad:
                    logger.warning(f"{bad}; asking again")
        except LLMBadRequestError as e:
            if (
                isinstance(e, ContextWindowExceededError | ToolsNotSupportedError)
                or "stream" not in e.message.lower()
            ):
                raise
            await self.refusals.refuse(turn.feature, e.message)
            turn.stream = False
        turn.upgrade = turn.pending is None and params.stream is None and self._may_upgrade(turn)
        return await self._plain(turn, params)

    async def _plain(self, turn: _Turn, params: ModelParams) -> Completion:
        try:
            completion = await self._send(turn, stream=False)
        except ContextWindowExceededError:
            if turn.pending is not None:  # an overflow explains the empty stream too
                self._unresolved = (*turn.pending, turn.body(False))
            raise
        except LLMError as e:
            if isinstance(e, LLMTimeoutError):
                self._timed_out(turn, params)
            # The server took the plain request (it answered, or kept generating): the empty
            # stream was no overflow, so it was the refusal.
            answered = isinstance(e, LLMTimeoutError) or e.status_code is not None
            pending, turn.pending = turn.pending, None
            if pending is not None and pending[0] == "stream_tools" and answered:
                await self.refusals.refuse(*pending)
            else:
                turn.pending = pending
            raise
        if turn.pending is not None:
            pending, turn.pending = turn.pending, None
            await self.refusals.refuse(*pending)
        return completion

    def _timed_out(self, turn: _Turn, params: ModelParams) -> None:
        """A plain attempt timed out: the next one streams, or (where it cannot) there is
        one more at most (the server may still be generating the abandoned answer, and every
        retry would queue behind it)."""
        if turn.upgrade:
            turn.stream = turn.upgraded = True
            return
        turn.plain_timeouts += 1
        if turn.plain_timeouts > 1 and params.attempt is not None and not params.attempt.final:
            params.attempt.final = True
            logger.warning(
                f"Model '{self.name}' timed out twice on a plain request; not asking again: "
                "the server may still be generating the answers left behind"
            )

    async def _send(self, turn: _Turn, *, stream: bool) -> Completion:
        """One HTTP request; streamed text goes to the turn's watcher (reasoning kept out)."""
        on_delta: DeltaCallback | None = None
        target = turn.on_delta
        if stream and target is not None:
            think = ThinkFilter()

            async def on_delta(piece: str) -> None:
                await deliver(target, think.feed(piece))

        body = turn.bodies.get(stream) or turn.body(stream)
        request = ChatRequest(body, stream, turn.timeout, self.name, on_delta)
        start = time.monotonic()
        try:
            data = await self.transport.send(request)
        finally:
            self.last_seconds = time.monotonic() - start
        return parse_completion(data, self.name)

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
