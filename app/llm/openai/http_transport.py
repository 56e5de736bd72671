"""The default transport: chat requests over plain HTTP with httpcore2 (installed with openai
and mcp, under httpx2), without the openai package (``import openai`` costs about a second).

Without a proxy in the environment a request goes straight to httpcore2's connection pool,
skipping client layers a chat request never uses (about a tenth of a local step's CPU); TLS
is verified as httpx2 does; with a proxy, httpx2's client routes it. Leaving a stream early
closes the connection, which is how servers such as llama.cpp learn to stop generating.
"""

from __future__ import annotations

import asyncio
import codecs
import ssl
import sys
import time
import urllib.parse
import zlib
from collections.abc import AsyncIterator
from typing import Any

from app.exceptions import (
    LLMConnectionError,
    LLMEndpointError,
    LLMError,
    LLMResponseError,
    LLMTimeoutError,
)
from app.llm.arguments import loads_safely
from app.llm.deltas import deliver
from app.llm.openai.errors import body_excerpt, endpoint_error, error_from_response
from app.llm.openai.streaming import StreamAssembler
from app.llm.openai.transport import ChatRequest, NoStream, Transport

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
        #: httpcore2's connection pool, requests sent to it directly (no proxy configured).
        self._pool: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._target: Any = None  # httpcore2.URL of the endpoint, parsed once
        self._raw_headers: list[tuple[bytes, bytes]] = []
        self._timeouts: dict[float, dict[str, float | None]] = {}

    def _sender(self) -> Any:
        """What sends a request, one per event loop (a connection pool cannot outlive its
        loop): httpx2's client when a proxy is configured, else httpcore2's pool."""
        loop = asyncio.get_running_loop()
        if (self._pool is None and self._client is None) or self._loop is not loop:
            self._client = self._pool = None
            if _proxy_configured():
                self._client = _proxied_client(self.max_connections)
            else:
                self._pool = self._new_pool()
            self._loop = loop
        return self._client if self._client is not None else self._pool

    def _new_pool(self) -> Any:
        import httpcore2

        split = urllib.parse.urlsplit(self.url)
        scheme = split.scheme.lower()
        if scheme not in ("http", "https") or not split.hostname:
            raise LLMEndpointError(
                f"Could not reach the LLM endpoint ({self.endpoint}): base_url must be an "
                "http:// or https:// URL",
                model="",
            )
        default_port = 443 if scheme == "https" else 80
        port = split.port or default_port
        # ASCII names (the usual case) skip the idna codec, an import of its own.
        hostname = split.hostname
        host = hostname.encode("ascii") if hostname.isascii() else hostname.encode("idna")
        target = urllib.parse.quote(split.path or "/", safe="/%:@!$&'()*+,;=~")
        if split.query:
            target += "?" + urllib.parse.quote(split.query, safe="/%:@!$&'()*+,;=~?")
        self._target = httpcore2.URL(
            scheme=scheme.encode("ascii"), host=host, port=port, target=target.encode("ascii")
        )
        netloc = split.hostname if ":" not in split.hostname else f"[{split.hostname}]"
        authority = netloc if port == default_port else f"{netloc}:{port}"
        # What httpx2's client would add, ours replacing them whatever their case; encoded
        # once. Compressed replies are not asked for (identity costs both ends less).
        merged = {
            "host": ("Host", authority),
            "accept-encoding": ("Accept-Encoding", "identity"),
            "connection": ("Connection", "keep-alive"),
        }
        merged.update({name.lower(): (name, value) for name, value in self.headers.items()})
        self._raw_headers = [
            (name.encode("ascii"), value.encode("ascii")) for name, value in merged.values()
        ]
        if scheme == "http":
            # Plain HTTP: skip loading the certificate store (~0.1 s). This context verifies
            # by default and trusts nothing: it could never make an insecure connection.
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        else:
            context = httpcore2.default_ssl_context()  # what httpx2 verifies with
        return httpcore2.AsyncConnectionPool(
            ssl_context=context,
            max_connections=self.max_connections,
            max_keepalive_connections=min(self.max_connections, 20),
            keepalive_expiry=5.0,
        )

    def _timeout(self, seconds: float) -> dict[str, float | None]:
        """The per-request timeout extension for ``seconds`` (built once per value)."""
        timeout = self._timeouts.get(seconds)
        if timeout is None:
            timeout = {"connect": min(seconds, _CONNECT_TIMEOUT)}
            timeout |= dict.fromkeys(("read", "write", "pool"), seconds)
            if len(self._timeouts) < 64:
                self._timeouts[seconds] = timeout
        return timeout

    async def _open(self, body: bytes, seconds: float) -> _Reply:
        """Send the request; the reply's body is not read yet (the caller closes it)."""
        sender = self._sender()
        if sender is self._client:
            import httpx2

            proxied = httpx2.Request(
                "POST",
                self.url,
                headers=self.headers,
                content=body,
                extensions={"timeout": self._timeout(seconds)},
            )
            return _ClientReply(await sender.send(proxied, stream=True))
        import httpcore2

        request = httpcore2.Request(
            b"POST",
            self._target,
            headers=[*self._raw_headers, (b"Content-Length", str(len(body)).encode("ascii"))],
            content=body,
            extensions={"timeout": self._timeout(seconds)},
        )
        return _PoolReply(await sender.handle_async_request(request))

    async def send(self, request: ChatRequest) -> dict[str, Any]:
        started = time.monotonic()
        try:
            reply = await self._open(request.body, request.timeout)
            dropped = False
            try:
                if reply.status >= 400:
                    body = await reply.read()
                    raise error_from_response(
                        reply.status,
                        body,
                        reply.headers,
                        model=request.model,
                        base_url=self.endpoint,
                    )
                content_type = reply.headers.get("content-type", "")
                if request.stream and "text/event-stream" in content_type:
                    try:
                        return await self._read_stream(reply, request)
                    except NoStream:
                        # llama-cpp-python drops the connection after an empty stream (its
                        # handler failed): the next request must not go on it.
                        dropped = True
                        raise
                body = await reply.read()
            finally:
                await reply.close(drop=dropped)  # unread (an error, a cancel): closed too
        except Exception as e:
            waited = time.monotonic() - started
            error = endpoint_error(e, endpoint=self.endpoint, model=request.model) or _translated(
                e,
                request.model,
                timeout=f"Request to model '{request.model}' ({self.endpoint}) timed out: no "
                f"answer within {waited:.1f} s (timeout {request.timeout:g} s)",
                failure=f"Could not reach the LLM endpoint ({self.endpoint}) for model "
                f"'{request.model}'",
            )
            if error is None:
                raise
            raise error from e
        data = decode_completion(body, request.model, self.endpoint)
        if request.stream:
            raise NoStream(data, "it answered a streamed request with plain JSON")
        return data

    async def _read_stream(self, reply: _Reply, request: ChatRequest) -> dict[str, Any]:
        assembler = StreamAssembler(request.model)
        on_delta = request.on_delta
        last = time.monotonic()
        # Lines are split on bytes at CR, LF or CRLF only, as SSE defines them (splitting
        # text would also break a JSON string at U+2028), and each is decoded whole.
        encoding = reply.charset
        pending = b""

        async def event(line: bytes) -> None:
            if assembler.done or not line.startswith(b"data:"):
                return  # read to the end: the connection is then reused
            text = assembler.add_payload(line[5:].strip().decode(encoding, "replace"))
            await deliver(on_delta, text)

        try:
            async for chunk in reply.chunks():
                last = time.monotonic()
                if pending:
                    chunk = pending + chunk
                lines = chunk.splitlines()
                # A line is whole once its end arrived; the last piece may still grow.
                pending = lines.pop() if lines and chunk[-1:] not in b"\r\n" else b""
                for line in lines:
                    await event(line)
            await event(pending)
        except Exception as e:
            silent = time.monotonic() - last
            error = _translated(
                e,
                request.model,
                timeout=f"The stream from model '{request.model}' ({self.endpoint}) stalled: "
                f"no data for {silent:.1f} s after {assembler.chunks} chunk(s) (stall timeout "
                f"{request.timeout:g} s)",
                failure=f"The connection to model '{request.model}' ({self.endpoint}) broke "
                f"mid-stream after {assembler.chunks} chunk(s)",
            )
            if error is None:
                raise
            if isinstance(error, LLMTimeoutError) and assembler.done:
                # A server that hangs after [DONE]: the answer is whole.
                return finish_stream(assembler, request.model, self.endpoint)
            raise error from e
        return finish_stream(assembler, request.model, self.endpoint)

    @property
    def connected(self) -> bool:
        """Whether a connection pool is open (after a request, until ``aclose``)."""
        return self._pool is not None or self._client is not None

    async def aclose(self) -> None:
        client, self._client = self._client, None
        pool, self._pool = self._pool, None
        if self._loop is asyncio.get_running_loop():
            for sender in (client, pool):
                if sender is not None:
                    await sender.aclose()


class _Reply:
    """A reply whose body is not read yet: status, headers (lower-case names), the body's
    bytes as they arrive (decoded from the content encoding), and closing it."""

    status: int
    headers: dict[str, str]
    _response: Any

    @property
    def charset(self) -> str:
        """The charset the content type names, else UTF-8."""
        for param in self.headers.get("content-type", "").split(";")[1:]:
            key, _, value = param.partition("=")
            if key.strip().lower() == "charset" and value.strip():
                name = value.strip().strip('"')
                try:
                    return codecs.lookup(name).name
                except LookupError:
                    break
        return "utf-8"

    def chunks(self) -> AsyncIterator[bytes]:
        raise NotImplementedError

    async def read(self) -> bytes:
        return b"".join([chunk async for chunk in self.chunks()])

    async def close(self, drop: bool = False) -> None:
        """Release the reply; ``drop`` closes its connection too (never reused)."""
        response = self._response
        if drop:
            stream = response.extensions.get("network_stream")
            if stream is not None:  # the pool then finds the connection gone and opens anew
                await stream.aclose()
        await response.aclose()


class _PoolReply(_Reply):
    """A reply from httpcore2's pool (its headers and stream are raw)."""

    def __init__(self, response: Any) -> None:
        self._response = response
        self.status = response.status
        headers: dict[str, str] = {}
        for raw_name, raw_value in response.headers:
            name, value = raw_name.decode("latin-1").lower(), raw_value.decode("latin-1")
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        self.headers = headers

    async def chunks(self) -> AsyncIterator[bytes]:
        decoder = _decoder(self.headers.get("content-encoding", ""))
        async for chunk in self._response.stream:
            if decoder is not None:
                chunk = decoder.decompress(chunk)
            if chunk:
                yield chunk
        if decoder is not None:
            rest = decoder.flush()
            if rest:
                yield rest


class _ClientReply(_Reply):
    """A reply from httpx2's client (the proxy path; it decodes the content itself)."""

    def __init__(self, response: Any) -> None:
        self._response = response
        self.status = response.status_code
        self.headers = {name.lower(): value for name, value in response.headers.items()}

    def chunks(self) -> AsyncIterator[bytes]:
        return self._response.aiter_bytes()


def _decoder(encoding: str) -> Any:
    """A zlib decompressor for a gzip or deflate body (None for identity). Other encodings
    were never asked for: a reply in one is refused."""
    name = encoding.strip().lower()
    if name in ("", "identity"):
        return None
    if name in ("gzip", "x-gzip", "deflate"):
        return zlib.decompressobj(zlib.MAX_WBITS | 32)  # gzip or zlib header, detected
    raise LLMResponseError(f"The endpoint answered in an encoding not asked for: {encoding!r}")


def _translated(error: Exception, model: str, *, timeout: str, failure: str) -> LLMError | None:
    """Our error for a failure of the HTTP layer (None: ``error`` is not one). The classes
    are looked up now: the proxy path imports httpx2 only on its first request."""
    timeouts, failures = _failures()
    if isinstance(error, timeouts):
        return LLMTimeoutError(timeout, model=model)
    if isinstance(error, failures):
        return LLMConnectionError(f"{failure}: {type(error).__name__}: {error}", model=model)
    return None


_Errors = tuple[type[BaseException], ...]


def _failures() -> tuple[_Errors, _Errors]:
    """(timeouts, other transport failures) of httpcore2 and, once used, httpx2."""
    import httpcore2

    timeouts: _Errors = (httpcore2.TimeoutException,)
    failures: _Errors = (
        httpcore2.NetworkError,
        httpcore2.ProtocolError,
        httpcore2.ProxyError,
        httpcore2.UnsupportedProtocol,
        zlib.error,
        OSError,
    )
    httpx2 = sys.modules.get("httpx2")  # the proxy path's client, when it was used
    if httpx2 is not None:
        timeouts += (httpx2.TimeoutException,)
        failures += (httpx2.HTTPError,)
    return timeouts, failures


def _proxied_client(max_connections: int) -> Any:
    """httpx2's client, which routes each request as the proxy settings say."""
    import httpx2

    limits = httpx2.Limits(
        max_connections=max_connections, max_keepalive_connections=min(max_connections, 20)
    )
    return httpx2.AsyncClient(limits=limits, follow_redirects=False)


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
        excerpt = body_excerpt(body)
        if excerpt.startswith(("an HTML page", "an empty HTML page")):
            # A web server, not an LLM API: asking again gets the same page.
            raise LLMEndpointError(
                f"{endpoint.rstrip('/') or 'The LLM endpoint'} answered model '{model}' with "
                f"{excerpt}, not a chat completion: base_url must be the API's URL (it "
                "usually ends in /v1), not a web page's",
                model=model,
            ) from e
        raise LLMResponseError(
            f"Model '{model}'{where} answered with invalid JSON ({e}): {excerpt!r}", model=model
        ) from e
    if not isinstance(data, dict):
        raise LLMResponseError(
            f"Model '{model}'{where} answered with JSON that is not an object: "
            f"{body_excerpt(body)!r}",
            model=model,
        )
    return data


def _proxy_configured() -> bool:
    """Whether the environment names a proxy (``HTTPS_PROXY``, ``ALL_PROXY``...): httpx2's
    client then decides, as it always did, which requests go through it."""
    import urllib.request

    return bool(urllib.request.getproxies())
