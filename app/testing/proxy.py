"""A logging reverse proxy on 127.0.0.1: forwards every request to a real endpoint and keeps
what went through (request bodies, response statuses), so a test can assert what the framework
*sent* to a real model server without reading that server's logs.

Responses are relayed as they arrive; a client leaving early sets ``client_left`` and shuts
the upstream connection, so the server sees the disconnect. It also works as a plain-http
forward proxy (``HTTP_PROXY``). ``rewrite`` may change a JSON body on its way upstream (the
recorded body stays as sent): tests add a llama.cpp ``grammar`` or a forced ``tool_choice``
to make a tiny model deterministic without touching the framework under test.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpcore2

from app.testing.http import Connection, HTTPRequest, LoopServer

_HOP_HEADERS = {
    "connection",
    "keep-alive",
    "transfer-encoding",
    "content-length",
    "host",
    "proxy-connection",
    "te",
    "upgrade",
    "accept-encoding",
}
_KEEP_RESPONSE = 256 * 1024


@dataclass
class ProxiedExchange:
    """One request and what the upstream answered (``status`` None: upstream unreachable)."""

    method: str
    path: str
    body: Any
    status: int | None = None
    response: bytes = b""
    done: threading.Event = field(default_factory=threading.Event, repr=False)
    #: Set when the client closed its connection before the whole answer was relayed.
    client_left: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def is_chat(self) -> bool:
        return self.path.rstrip("/").endswith("/chat/completions")

    @property
    def stream(self) -> bool:
        return isinstance(self.body, dict) and bool(self.body.get("stream"))

    @property
    def tools(self) -> list[Any] | None:
        """The request's ``tools``; None when the key was not sent."""
        return self.body.get("tools") if isinstance(self.body, dict) else None

    @property
    def has_tools(self) -> bool:
        return isinstance(self.body, dict) and "tools" in self.body

    @property
    def messages(self) -> list[dict[str, Any]]:
        value = self.body.get("messages") if isinstance(self.body, dict) else None
        return value if isinstance(value, list) else []

    def response_json(self) -> Any:
        """The response body as JSON (None for streams and non-JSON answers)."""
        try:
            return json.loads(self.response)
        except ValueError:
            return None

    def chunks(self) -> list[dict[str, Any]]:
        """The JSON events of a streamed response (``data: {...}`` lines), in order."""
        events = []
        for line in self.response.decode("utf-8", "replace").splitlines():
            if line.startswith("data:") and line[5:].strip().startswith("{"):
                with contextlib.suppress(ValueError):
                    events.append(json.loads(line[5:]))
        return events

    def completion(self) -> dict[str, Any] | None:
        """The answer, streamed or not, as ``{"content", "finish_reason", "usage"}``; None when
        nothing usable came (an error, an empty stream)."""
        data = self.response_json()
        if isinstance(data, dict) and data.get("choices"):
            choice = data["choices"][0]
            return {
                "content": (choice.get("message") or {}).get("content"),
                "finish_reason": choice.get("finish_reason"),
                "usage": data.get("usage"),
            }
        chunks = self.chunks()
        if not chunks:
            return None
        parts: list[str] = []
        finish, usage = None, None
        for chunk in chunks:
            usage = chunk.get("usage") or usage
            for choice in chunk.get("choices") or ():
                piece = (choice.get("delta") or {}).get("content")
                if isinstance(piece, str):
                    parts.append(piece)
                finish = choice.get("finish_reason") or finish
        return {"content": "".join(parts), "finish_reason": finish, "usage": usage}


class RecordingProxy(LoopServer):
    """Use ``base_url`` in place of the upstream's; ``exchanges`` lists every request in
    arrival order, ``chat_requests()`` only the chat ones."""

    label = "proxy"

    def __init__(
        self,
        upstream_base_url: str,
        rewrite: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        super().__init__("127.0.0.1", 0, "recording-proxy")
        self.rewrite = rewrite
        parts = urlsplit(upstream_base_url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"Only http:// upstreams are supported, not {upstream_base_url!r}")
        self._upstream = f"http://{parts.netloc}"
        self._prefix = parts.path.rstrip("/")
        self.exchanges: list[ProxiedExchange] = []
        self._lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"{self.root_url}{self._prefix}"

    def chat_requests(self) -> list[ProxiedExchange]:
        with self._lock:
            return [e for e in self.exchanges if e.is_chat]

    def clear(self) -> None:
        with self._lock:
            self.exchanges.clear()

    async def _respond(self, conn: Connection, request: HTTPRequest) -> bool:
        """Forward one request; a client hanging up first cancels the upstream request,
        which closes its connection, so the server sees the disconnect."""
        raw = request.body
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        exchange = ProxiedExchange(method=request.method, path=request.target, body=body)
        with self._lock:
            self.exchanges.append(exchange)
        if self.rewrite is not None and isinstance(body, dict):
            raw = json.dumps(self.rewrite(json.loads(raw))).encode()
        relay = asyncio.ensure_future(self._relay(conn, exchange, request, raw))
        hangup = asyncio.ensure_future(conn.gone.wait())
        await asyncio.wait({relay, hangup}, return_when=asyncio.FIRST_COMPLETED)
        hangup.cancel()
        if not relay.done():
            exchange.client_left.set()
            relay.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await relay
        exchange.done.set()
        return False  # one exchange per connection

    async def _relay(
        self, conn: Connection, exchange: ProxiedExchange, request: HTTPRequest, raw: bytes
    ) -> None:
        parts = urlsplit(request.target)  # absolute-form when used as a forward proxy
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        headers = [
            (k.encode("latin-1"), v.encode("latin-1"))
            for k, v in request.headers.items()
            if k not in _HOP_HEADERS
        ]
        try:
            async with (
                httpcore2.AsyncConnectionPool() as pool,
                pool.stream(
                    request.method,
                    self._upstream + target,
                    headers=headers,
                    content=raw or None,
                    extensions={"timeout": {"read": 600.0}},
                ) as response,
            ):
                exchange.status = response.status
                fields = [
                    (k.decode("latin-1"), v.decode("latin-1"))
                    for k, v in response.headers
                    if k.decode("latin-1").lower() not in _HOP_HEADERS
                ]
                conn.send_head(response.status, fields, close=True)
                kept = bytearray()
                async for chunk in response.aiter_stream():
                    kept += chunk[: max(0, _KEEP_RESPONSE - len(kept))]
                    conn.send_data(chunk)
                    await conn.drain()
                exchange.response = bytes(kept)  # before the client can see the end
                conn.end()
        except ConnectionError:
            exchange.client_left.set()  # leaving the stream above closed the upstream
        except _UPSTREAM_ERRORS as e:
            if exchange.status is None:
                message = f"upstream unreachable: {e}".encode()
                conn.send_plain(502, message, content_type="text/plain", close=True)


_UPSTREAM_ERRORS = (
    httpcore2.NetworkError,
    httpcore2.TimeoutException,
    httpcore2.ProtocolError,
    httpcore2.UnsupportedProtocol,
)
