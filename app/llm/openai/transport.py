"""A transport takes one ready chat request and gives back the completion body (a streamed one
reassembled, its text handed to ``on_delta`` as it arrives): ``HttpTransport`` (default),
``OpenAITransport`` (the SDK) or ``app.testing.FunctionModel``, inside the :class:`Wrapper`
layers ``app.llm.stack`` puts around it.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

from app.llm.model import DeltaCallback


@dataclass(slots=True)
class ChatRequest:
    """One chat-completions request, ready to send; ``timeout`` bounds a plain request whole
    and a streamed one between two chunks, so a long answer that keeps coming is never cut."""

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


class Wrapper(Transport):
    """A layer around the ``inner`` transport (``Recording``, ``RateGate``, ``Timed``)."""

    def __init__(self, inner: Transport) -> None:
        self.inner = inner

    async def aclose(self) -> None:
        await self.inner.aclose()


def innermost(transport: Transport) -> Transport:
    """The transport under its wrappers (the one that reaches the endpoint)."""
    while isinstance(transport, Wrapper):
        transport = transport.inner
    return transport


async def deliver(on_delta: DeltaCallback | None, text: str | None) -> None:
    """Hand ``text`` to ``on_delta`` (sync or async) when both are there."""
    if on_delta is None or not text:
        return
    outcome = on_delta(text)
    if inspect.isawaitable(outcome):
        await outcome
