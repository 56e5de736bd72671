"""What sits under an ``LLM``: a transport takes one ready chat request and gives back the
completion body. Everything else (retries, rate limits, recording) wraps a transport.

Transports: :class:`app.llm.http_transport.HttpTransport` (plain HTTP with httpx2, the default),
:class:`app.llm.sdk_transport.OpenAITransport` (the openai SDK, for Azure or on request) and
:class:`app.testing.FunctionModel` (in process, for unit tests). A streamed request hands each
piece of text to ``on_delta`` as it arrives and still returns the whole answer, reassembled in
the shape of a non-streamed completion, so there is one path above the transport.
"""

from __future__ import annotations

import inspect
import time
from dataclasses import dataclass
from typing import Any

from app.llm.context import RequestGate, RequestTimer
from app.llm.model import DeltaCallback

__all__ = [
    "ChatRequest",
    "DeltaCallback",
    "GatedTransport",
    "NoStream",
    "TimedTransport",
    "Transport",
    "deliver",
]


@dataclass(slots=True)
class ChatRequest:
    """One chat-completions request, ready to send.

    ``body`` is the JSON body. ``timeout`` bounds a plain request as a whole and a streamed
    one between two chunks (a stall), so a long answer that keeps coming is never cut.
    """

    body: bytes
    stream: bool
    timeout: float
    model: str
    on_delta: DeltaCallback | None = None


class NoStream(Exception):
    """The endpoint answered a streamed request without a stream: an empty event stream
    (llama.cpp with tools) or a plain JSON answer, carried in ``data`` when there was one."""

    def __init__(self, data: dict[str, Any] | None, why: str) -> None:
        super().__init__(why)
        self.data = data
        self.why = why


class Transport:
    """Sends chat requests to one endpoint. Raises our ``LLMError`` types only (and
    :class:`NoStream`); a cancelled request closes its connection, so the server stops
    generating an answer nobody will read."""

    #: Short name for logs and config (``"httpx"``, ``"openai"``, ``"function"``).
    name = "transport"
    #: Where requests go (for messages), when there is such a place.
    endpoint = ""

    async def send(self, request: ChatRequest) -> dict[str, Any]:
        raise NotImplementedError

    async def aclose(self) -> None:
        """Release connections (optional: they are also released at exit)."""


class GatedTransport(Transport):
    """Awaits a gate (e.g. the batch runner's shared rate limit) before every attempt."""

    def __init__(self, inner: Transport, gate: RequestGate) -> None:
        self.inner = inner
        self.gate = gate
        self.name = inner.name
        self.endpoint = inner.endpoint

    async def send(self, request: ChatRequest) -> dict[str, Any]:
        await self.gate()
        return await self.inner.send(request)


class TimedTransport(Transport):
    """Reports each attempt's time on the wire (send to the end of the answer, failures
    included) to a timer, e.g. the real-model bench separating model time from ours."""

    def __init__(self, inner: Transport, timer: RequestTimer) -> None:
        self.inner = inner
        self.timer = timer
        self.name = inner.name
        self.endpoint = inner.endpoint

    async def send(self, request: ChatRequest) -> dict[str, Any]:
        start = time.perf_counter()
        try:
            return await self.inner.send(request)
        finally:
            self.timer(time.perf_counter() - start)


async def deliver(on_delta: DeltaCallback | None, text: str | None) -> None:
    """Hand ``text`` to ``on_delta`` (sync or async) when both are there."""
    if on_delta is None or not text:
        return
    outcome = on_delta(text)
    if inspect.isawaitable(outcome):
        await outcome
