"""One turn's request on the wire: streamed or plain, retried, and what the endpoint refused.

With ``stream = "auto"`` a turn is streamed when someone watches its text or the endpoint is
slow (the first turn, and after one that took ``stream_after`` seconds): a fast endpoint gets
plain requests, cheaper for both ends. A plain request that timed out is retried streamed, so
the retry does not queue behind the abandoned answer. A refusal to stream is remembered
(``Refusals``) and the turn asked again plainly.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from app.exceptions import (
    ContextWindowExceededError,
    LLMBadRequestError,
    LLMResponseError,
    LLMTimeoutError,
    ToolsNotSupportedError,
)
from app.llm.context import request_gate, request_timer
from app.llm.openai.messages import Completion, parse_completion
from app.llm.openai.streaming import DeltaRelay, ThinkFilter
from app.llm.openai.transport import (
    ChatRequest,
    DeltaCallback,
    NoStream,
    Transport,
    deliver,
    transport_for,
)
from app.llm.recording import active_tape
from app.llm.refusals import Refusals
from app.llm.retry import with_retries
from app.logger import logger

if TYPE_CHECKING:
    from app.config import LLMSettings

__all__ = ["BodyBuilder", "TurnExchange"]

#: Builds the request body, streamed (True) or plain (False).
BodyBuilder = Callable[[bool], bytes]


class TurnExchange:
    """Sends one LLM's turns: its transport and in-flight bound, its endpoint's refusals, and
    how fast the endpoint answered last (the ``auto`` streaming choice)."""

    def __init__(
        self, settings: LLMSettings, refusals: Refusals, transport: Transport | None = None
    ) -> None:
        self.settings = settings
        self._transport = transport
        self._slots = asyncio.Semaphore(settings.max_concurrent_requests)
        self._slots_loop: asyncio.AbstractEventLoop | None = None
        self.refusals = refusals
        #: Seconds the last request took (None before the first one).
        self.last_seconds: float | None = None

    @property
    def transport(self) -> Transport:
        """The transport requests go through (built from the profile on first use)."""
        if self._transport is None:
            self._transport = transport_for(self.settings)
        return self._transport

    async def aclose(self) -> None:
        if self._transport is not None:
            await self._transport.aclose()

    def streams(self, *, tools: bool, watched: bool, asked: bool | None = None) -> bool:
        """Whether this turn is streamed: as ``asked`` by the caller, else as the profile says
        (its ``false`` always wins)."""
        mode = self.settings.stream
        if asked is False or not self.refusals.may_stream(tools=tools, allowed=mode is not False):
            return False
        if asked is None and mode == "auto" and not watched:
            return self.last_seconds is None or self.last_seconds >= self.settings.stream_after
        return True

    async def _attempt(self, request: ChatRequest) -> dict[str, Any]:
        """One attempt through the context's recording tape (which may answer instead), rate
        limit gate and timer (the gate's wait is not model time)."""
        gate, timer, tape = request_gate.get(), request_timer.get(), active_tape.get()

        async def send() -> dict[str, Any]:
            if gate is not None:
                await gate()
            start = time.perf_counter()
            try:
                return await self.transport.send(request)
            finally:
                if timer is not None:
                    timer(time.perf_counter() - start)

        if tape is None:
            return await send()
        return await tape.exchange(request.model, request.body, send, request.on_delta)

    def _slots_here(self) -> asyncio.Semaphore:
        """The in-flight bound, one per event loop (a semaphore is bound to its loop)."""
        loop = asyncio.get_running_loop()
        if self._slots_loop is not loop:
            self._slots = asyncio.Semaphore(self.settings.max_concurrent_requests)
            self._slots_loop = loop
        return self._slots

    async def send(
        self,
        build: BodyBuilder,
        *,
        stream: bool,
        timeout: float,
        max_retries: int,
        relay: DeltaRelay | None,
        upgrade: bool = False,
    ) -> Completion:
        """One request, retried on transient failures (a malformed reply too); streamed text
        goes through ``relay``. With ``upgrade``, a plain attempt that timed out is retried
        streamed."""
        model = self.settings.model
        body = build(stream)
        upgraded = False

        async def attempt() -> Completion:
            nonlocal stream, body, upgraded
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
                    data = await self._attempt(request)
            except LLMTimeoutError:
                if upgrade and not stream:
                    stream, body, upgraded = True, build(True), True
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

        return await with_retries(attempt, max_retries=max_retries, settings=self.settings)

    async def exchange(
        self,
        build: BodyBuilder,
        *,
        tools: bool,
        timeout: float,
        max_retries: int,
        relay: DeltaRelay | None,
        stream: bool | None,
    ) -> Completion:
        """The completion for one turn; a refusal to stream is remembered and the turn asked
        again plainly."""
        model = self.settings.model
        pending: tuple[str, str] | None = None
        feature = "stream_tools" if tools else "stream"
        if self.streams(tools=tools, watched=relay is not None, asked=stream):
            try:
                return await self.send(
                    build, stream=True, timeout=timeout, max_retries=max_retries, relay=relay
                )
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
        completion = await self.send(
            build,
            stream=False,
            timeout=timeout,
            max_retries=max_retries,
            relay=None,
            upgrade=upgrade,
        )
        if pending is not None:
            await self.refusals.refuse(*pending)
        return completion
