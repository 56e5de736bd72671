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

import contextlib
import http.client
import json
import select
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

__all__ = ["ProxiedExchange", "RecordingProxy"]

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


class RecordingProxy:
    """Use ``base_url`` in place of the upstream's; ``exchanges`` lists every request in
    arrival order, ``chat_requests()`` only the chat ones."""

    def __init__(
        self,
        upstream_base_url: str,
        rewrite: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        self.rewrite = rewrite
        parts = urlsplit(upstream_base_url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"Only http:// upstreams are supported, not {upstream_base_url!r}")
        self._upstream = (parts.hostname, parts.port or 80)
        self._prefix = parts.path.rstrip("/")
        self.exchanges: list[ProxiedExchange] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("The proxy is not started")
        return f"http://127.0.0.1:{self._server.server_address[1]}{self._prefix}"

    def chat_requests(self) -> list[ProxiedExchange]:
        with self._lock:
            return [e for e in self.exchanges if e.is_chat]

    def clear(self) -> None:
        with self._lock:
            self.exchanges.clear()

    def _record(self, exchange: ProxiedExchange) -> None:
        with self._lock:
            self.exchanges.append(exchange)

    def start(self) -> RecordingProxy:
        proxy = self

        class Handler(_Handler):
            owner = proxy

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, daemon=True, name="recording-proxy"
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def __enter__(self) -> RecordingProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Handler(BaseHTTPRequestHandler):
    owner: RecordingProxy
    protocol_version = "HTTP/1.0"  # one exchange per connection; the body ends at close

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _forward(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        exchange = ProxiedExchange(method=self.command, path=self.path, body=body)
        self.owner._record(exchange)
        rewrite = self.owner.rewrite
        if rewrite is not None and isinstance(body, dict):
            raw = json.dumps(rewrite(json.loads(raw))).encode()
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_HEADERS}
        upstream = http.client.HTTPConnection(*self.owner._upstream, timeout=600)
        watcher = threading.Thread(
            target=self._watch_client,
            args=(exchange, upstream),
            daemon=True,
            name="recording-proxy-watch",
        )
        try:
            target = self.path
            if target.startswith("http://"):  # absolute-form: used as a forward proxy
                parts = urlsplit(target)
                target = parts.path + (f"?{parts.query}" if parts.query else "")
            upstream.request(self.command, target, body=raw or None, headers=headers)
            watcher.start()
            response = upstream.getresponse()
            exchange.status = response.status
            self.send_response(response.status)
            for name, value in response.getheaders():
                if name.lower() not in _HOP_HEADERS:
                    self.send_header(name, value)
            self.send_header("Connection", "close")
            self.end_headers()
            kept = bytearray()
            while chunk := response.read1(65536):
                if len(kept) < _KEEP_RESPONSE:
                    kept += chunk[: _KEEP_RESPONSE - len(kept)]
                self.wfile.write(chunk)
                self.wfile.flush()
            exchange.response = bytes(kept)
        except (BrokenPipeError, ConnectionResetError):
            exchange.client_left.set()  # closing upstream below tells the server
        except OSError as e:
            if exchange.status is None:
                with contextlib.suppress(OSError):
                    self.send_error(502, f"upstream unreachable: {e}")
        finally:
            upstream.close()
            exchange.done.set()

    do_GET = do_POST = _forward

    def _watch_client(
        self, exchange: ProxiedExchange, upstream: http.client.HTTPConnection
    ) -> None:
        """Notice the client hanging up while the upstream has not answered yet (a blocking
        read would only find out when the answer is written) and pass the hang-up on."""
        client = self.connection
        while not exchange.done.is_set():
            try:
                readable, _, _ = select.select([client], [], [], 0.1)
                if not readable:
                    continue
                if client.recv(1, socket.MSG_PEEK):
                    return  # the client sent more data: not a hang-up
            except (OSError, ValueError):
                pass
            if not exchange.done.is_set():
                exchange.client_left.set()
                if upstream.sock is not None:
                    with contextlib.suppress(OSError):
                        upstream.sock.shutdown(socket.SHUT_RDWR)
            return
