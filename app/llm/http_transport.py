"""The default transport: chat requests over plain HTTP with httpx, no openai package.

``import openai`` costs about a second; an agent step needs one POST. Errors are built from
the status code, body and headers (``app.llm.errors.error_from_response``). httpx itself is
imported on the first request. A streamed answer is read event by event with a stall timeout
between chunks; leaving the stream early (an error, a timeout, a cancelled task) closes the
connection, which is how servers such as llama.cpp learn to stop generating.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from app.exceptions import LLMConnectionError, LLMResponseError, LLMTimeoutError
from app.llm.arguments import loads_safely
from app.llm.errors import error_from_response
from app.llm.streaming import StreamAssembler
from app.llm.transport import ChatRequest, NoStream, Transport, deliver

__all__ = ["DEFAULT_BASE_URL", "HttpTransport"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
#: Connecting is quick or not at all; the request's own timeout covers the rest.
_CONNECT_TIMEOUT = 30.0


class HttpTransport(Transport):
    """POSTs chat requests to ``{base_url}/chat/completions`` (OpenAI-compatible servers)."""

    name = "httpx"

    def __init__(
        self,
        *,
        base_url: str | None,
        api_key: str | None,
        max_connections: int = 100,
        headers: dict[str, str] | None = None,
    ) -> None:
        base = (base_url or DEFAULT_BASE_URL).rstrip("/")
        self.endpoint = base
        self.url = base + "/chat/completions"
        self.headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": "OpenManus-py",
        }
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        self.headers.update(headers or {})
        self.max_connections = max_connections
        self._client: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _http(self) -> Any:
        """The httpx client, one per event loop (a connection pool cannot outlive its loop)."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            import httpx

            self._client = httpx.AsyncClient(
                limits=httpx.Limits(
                    max_connections=self.max_connections,
                    max_keepalive_connections=min(self.max_connections, 20),
                ),
                follow_redirects=False,
            )
            self._loop = loop
        return self._client

    def _timeout(self, seconds: float) -> Any:
        import httpx

        return httpx.Timeout(seconds, connect=min(seconds, _CONNECT_TIMEOUT))

    async def send(self, request: ChatRequest) -> dict[str, Any]:
        import httpx

        http = self._http()
        started = time.monotonic()
        try:
            async with http.stream(
                "POST",
                self.url,
                content=request.body,
                headers=self.headers,
                timeout=self._timeout(request.timeout),
            ) as response:
                if response.status_code >= 400:
                    body = await response.aread()
                    raise error_from_response(
                        response.status_code,
                        body,
                        response.headers,
                        model=request.model,
                        base_url=self.endpoint,
                    )
                content_type = response.headers.get("content-type", "")
                if request.stream and "text/event-stream" in content_type:
                    return await self._read_stream(response, request)
                body = await response.aread()
        except httpx.TimeoutException as e:
            waited = time.monotonic() - started
            raise LLMTimeoutError(
                f"Request to model '{request.model}' ({self.endpoint}) timed out: no answer "
                f"within {waited:.1f} s (timeout {request.timeout:g} s)",
                model=request.model,
            ) from e
        except (httpx.HTTPError, OSError) as e:
            raise LLMConnectionError(
                f"Could not reach the LLM endpoint ({self.endpoint}) for model "
                f"'{request.model}': {type(e).__name__}: {e}",
                model=request.model,
            ) from e
        data = decode_completion(body, request.model, self.endpoint)
        if request.stream:
            raise NoStream(data, "it answered a streamed request with plain JSON")
        return data

    async def _read_stream(self, response: Any, request: ChatRequest) -> dict[str, Any]:
        import httpx

        assembler = StreamAssembler(request.model)
        last = time.monotonic()
        try:
            async for line in response.aiter_lines():
                last = time.monotonic()
                if assembler.done or not line.startswith("data:"):
                    continue  # read to the end: the connection is then reused
                text = assembler.add_payload(line[5:].strip())
                await deliver(request.on_delta, text)
        except httpx.TimeoutException as e:
            if assembler.done:  # a server that hangs after [DONE]: the answer is whole
                return finish_stream(assembler, request.model, self.endpoint)
            silent = time.monotonic() - last
            raise LLMTimeoutError(
                f"The stream from model '{request.model}' ({self.endpoint}) stalled: no data "
                f"for {silent:.1f} s after {assembler.chunks} chunk(s) (stall timeout "
                f"{request.timeout:g} s)",
                model=request.model,
            ) from e
        except (httpx.HTTPError, OSError) as e:
            raise LLMConnectionError(
                f"The connection to model '{request.model}' ({self.endpoint}) broke "
                f"mid-stream after {assembler.chunks} chunk(s): {type(e).__name__}: {e}",
                model=request.model,
            ) from e
        return finish_stream(assembler, request.model, self.endpoint)

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None and self._loop is asyncio.get_running_loop():
            await client.aclose()


def finish_stream(assembler: StreamAssembler, model: str, endpoint: str) -> dict[str, Any]:
    """The reassembled completion, or why the stream is not one."""
    if assembler.chunks == 0:
        raise NoStream(None, "it answered a streamed request with an empty event stream")
    if not assembler.complete:
        raise LLMConnectionError(
            f"The stream from model '{model}' ({endpoint}) ended before the answer was "
            f"complete (no finish_reason and no [DONE] after {assembler.chunks} chunk(s))",
            model=model,
        )
    return assembler.completion()


def decode_completion(body: bytes, model: str, endpoint: str = "") -> dict[str, Any]:
    """A completion body's JSON; anything that is not a JSON object is ``LLMResponseError``."""
    where = f" ({endpoint})" if endpoint else ""
    try:
        data = loads_safely(body)
    except ValueError as e:
        raise LLMResponseError(
            f"Model '{model}'{where} answered with invalid JSON ({e}): {body[:200]!r}",
            model=model,
        ) from e
    if not isinstance(data, dict):
        raise LLMResponseError(
            f"Model '{model}'{where} answered with JSON that is not an object: {body[:200]!r}",
            model=model,
        )
    return data
