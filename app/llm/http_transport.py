"""The default transport: chat requests over plain HTTP with httpx2, no openai package.

httpx2 is the maintained fork of httpx that the openai and mcp packages are built on, so it is
always installed with them (httpx itself is not), and importing it does not pull in a command
line client's rich/click/pygments as ``import httpx`` does.

``import openai`` costs about a second; an agent step needs one POST. Errors are built from
the status code, body and headers (``app.llm.errors.error_from_response``). httpx2 is
imported on the first request. A streamed answer is read event by event with a stall timeout
between chunks; leaving the stream early (an error, a timeout, a cancelled task) closes the
connection, which is how servers such as llama.cpp learn to stop generating.

Per request, the work is kept to what one POST needs: the URL, headers and timeouts are built
once, and when no proxy is configured in the environment the request goes straight to httpx2's
connection pool (``AsyncHTTPTransport.handle_async_request``, its public transport API),
skipping the client's per-call layers (URL merging, cookies, auth and redirect handling) that a
chat request never uses. With a proxy configured, httpx2's client routes it as before. An event
stream is split into lines on bytes (CR, LF or CRLF, as the SSE format defines them), one
``json.loads`` per event.
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
        #: httpx2's client when the environment names a proxy (it routes the request), else None.
        self._client: Any = None
        #: httpx2's connection pool, requests sent to it directly (no proxy configured).
        self._pool: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._url: Any = None  # httpx2.URL, parsed once
        self._raw_headers: list[tuple[bytes, bytes]] = []
        self._timeouts: dict[float, dict[str, float | None]] = {}

    def _http(self) -> Any:
        """What sends a request, one per event loop (a connection pool cannot outlive its
        loop): httpx2's client when a proxy is configured, else its connection pool."""
        loop = asyncio.get_running_loop()
        if (self._pool is None and self._client is None) or self._loop is not loop:
            import httpx2

            limits = httpx2.Limits(
                max_connections=self.max_connections,
                max_keepalive_connections=min(self.max_connections, 20),
            )
            self._url = httpx2.URL(self.url)
            # What httpx2's client would add by default, ours replacing them whatever their
            # case; encoded once, reused by every request.
            merged = {
                "accept-encoding": ("Accept-Encoding", "gzip, deflate"),
                "connection": ("Connection", "keep-alive"),
            }
            merged.update({name.lower(): (name, value) for name, value in self.headers.items()})
            self._raw_headers = [
                (name.encode("ascii"), value.encode("ascii")) for name, value in merged.values()
            ]
            if _proxy_configured():
                self._client, self._pool = (
                    httpx2.AsyncClient(limits=limits, follow_redirects=False),
                    None,
                )
            elif self._url.scheme == "http":
                # Plain HTTP (a local server): no TLS, so no certificate store to load
                # (loading it takes ~0.1 s). The context given instead verifies by default
                # and trusts nothing: it could never make an insecure connection.
                import ssl

                no_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
                self._client, self._pool = (
                    None,
                    httpx2.AsyncHTTPTransport(limits=limits, verify=no_tls),
                )
            else:
                self._client, self._pool = None, httpx2.AsyncHTTPTransport(limits=limits)
            self._loop = loop
        return self._client if self._client is not None else self._pool

    def _timeout(self, seconds: float) -> dict[str, float | None]:
        """httpx2's per-request timeout extension for ``seconds`` (built once per value)."""
        timeout = self._timeouts.get(seconds)
        if timeout is None:
            import httpx2

            timeout = httpx2.Timeout(seconds, connect=min(seconds, _CONNECT_TIMEOUT)).as_dict()
            if len(self._timeouts) < 64:
                self._timeouts[seconds] = timeout
        return timeout

    async def _open(self, body: bytes, seconds: float) -> Any:
        """Send the request; the response's body is not read yet (the caller closes it)."""
        import httpx2

        sender = self._http()
        request = httpx2.Request(
            "POST",
            self._url,
            headers=self._raw_headers,
            content=body,
            extensions={"timeout": self._timeout(seconds)},
        )
        if sender is self._client:
            return await sender.send(request, stream=True)
        return await sender.handle_async_request(request)

    async def send(self, request: ChatRequest) -> dict[str, Any]:
        import httpx2

        started = time.monotonic()
        try:
            response = await self._open(request.body, request.timeout)
            try:
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
            finally:
                await response.aclose()  # unread (an error, a cancel): the connection closes
        except httpx2.TimeoutException as e:
            waited = time.monotonic() - started
            raise LLMTimeoutError(
                f"Request to model '{request.model}' ({self.endpoint}) timed out: no answer "
                f"within {waited:.1f} s (timeout {request.timeout:g} s)",
                model=request.model,
            ) from e
        except (httpx2.HTTPError, OSError) as e:
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
        import httpx2

        assembler = StreamAssembler(request.model)
        on_delta = request.on_delta
        last = time.monotonic()
        # Lines are split on bytes at CR, LF or CRLF only, as SSE defines them (splitting
        # text would also break a JSON string at U+2028), and each is decoded whole.
        encoding = response.encoding or "utf-8"
        if response.headers.get("content-encoding", "identity") in ("", "identity"):
            chunks = response.aiter_raw()
        else:
            chunks = response.aiter_bytes()  # compressed: httpx2 decodes it
        pending = b""
        try:
            async for chunk in chunks:
                last = time.monotonic()
                if pending:
                    chunk = pending + chunk
                lines = chunk.splitlines()
                # A line is whole once its end arrived; the last piece may still grow.
                pending = lines.pop() if lines and chunk[-1:] not in b"\r\n" else b""
                for line in lines:
                    if assembler.done or not line.startswith(b"data:"):
                        continue  # read to the end: the connection is then reused
                    text = assembler.add_payload(line[5:].strip().decode(encoding, "replace"))
                    if text and on_delta is not None:
                        await deliver(on_delta, text)
            if pending.startswith(b"data:") and not assembler.done:
                text = assembler.add_payload(pending[5:].strip().decode(encoding, "replace"))
                if text and on_delta is not None:
                    await deliver(on_delta, text)
        except httpx2.TimeoutException as e:
            if assembler.done:  # a server that hangs after [DONE]: the answer is whole
                return finish_stream(assembler, request.model, self.endpoint)
            silent = time.monotonic() - last
            raise LLMTimeoutError(
                f"The stream from model '{request.model}' ({self.endpoint}) stalled: no data "
                f"for {silent:.1f} s after {assembler.chunks} chunk(s) (stall timeout "
                f"{request.timeout:g} s)",
                model=request.model,
            ) from e
        except (httpx2.HTTPError, OSError) as e:
            raise LLMConnectionError(
                f"The connection to model '{request.model}' ({self.endpoint}) broke "
                f"mid-stream after {assembler.chunks} chunk(s): {type(e).__name__}: {e}",
                model=request.model,
            ) from e
        return finish_stream(assembler, request.model, self.endpoint)

    async def aclose(self) -> None:
        client, self._client = self._client, None
        pool, self._pool = self._pool, None
        if self._loop is asyncio.get_running_loop():
            for sender in (client, pool):
                if sender is not None:
                    await sender.aclose()


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


def _proxy_configured() -> bool:
    """Whether the environment names a proxy (``HTTPS_PROXY``, ``ALL_PROXY``...): httpx2's
    client then decides, as it always did, which requests go through it."""
    import urllib.request

    return bool(urllib.request.getproxies())
