"""A transport takes one ready chat request and gives back the completion body (a streamed one
reassembled, its text handed to ``on_delta`` as it arrives): ``HttpTransport`` (default),
``OpenAITransport`` (the SDK) or ``app.testing.FunctionTransport`` (a function, in process).
"""

from __future__ import annotations

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
