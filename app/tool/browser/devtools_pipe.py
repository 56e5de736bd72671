"""Chromium's DevTools over ``--remote-debugging-pipe``, served to browser-use as one
WebSocket on 127.0.0.1 at an unguessable, redacted path: no TCP port anyone local could drive
(why, and what is refused: docs/sandbox.md)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
from http import HTTPStatus
from typing import Any

from app.logger import register_secret

#: The id of our own readiness probe (browser-use numbers its commands from 1).
_PROBE_ID = 2_000_000_000


class _PipeReader(asyncio.Protocol):
    def __init__(self, relay: PipeRelay) -> None:
        self.relay = relay
        self.buffer = bytearray()

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while (end := self.buffer.find(b"\0")) >= 0:
            message = bytes(self.buffer[:end])
            del self.buffer[: end + 1]
            self.relay._from_browser(message)

    def eof_received(self) -> bool | None:
        self.relay._browser_gone()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.relay._browser_gone()


class PipeRelay:
    """Our ends of Chromium's DevTools pipe, and the WebSocket server in front of them."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self._read_fd = read_fd
        self._write_fd = write_fd
        token = secrets.token_urlsafe(32)
        register_secret(token)  # browser-use logs the URL it connects to: never the token
        self._path = f"/devtools/browser/{token}"
        self._server: Any = None
        self._reader: asyncio.BaseTransport | None = None
        self._writer: asyncio.WriteTransport | None = None
        self._client: Any = None
        self._queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.answered = asyncio.Event()
        self.gone = asyncio.Event()
        self.url = ""

    async def start(self) -> str:
        """Attach to the pipe, probe the browser, listen; returns the capability URL."""
        from websockets.asyncio.server import serve  # the browser extra

        loop = asyncio.get_running_loop()
        read_file = os.fdopen(self._read_fd, "rb", buffering=0)
        write_file = os.fdopen(self._write_fd, "wb", buffering=0)
        self._read_fd = self._write_fd = -1  # the file objects own them now
        self._reader, _ = await loop.connect_read_pipe(lambda: _PipeReader(self), read_file)
        self._writer, _ = await loop.connect_write_pipe(asyncio.BaseProtocol, write_file)
        probe = {"id": _PROBE_ID, "method": "Browser.getVersion"}
        self._to_browser(json.dumps(probe).encode())
        self._server = await serve(
            self._serve,
            "127.0.0.1",
            0,
            process_request=self._check_path,
            max_size=None,
            compression=None,
            ping_interval=None,
        )
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"ws://127.0.0.1:{port}{self._path}"
        return self.url

    def _check_path(self, connection: Any, request: Any) -> Any:
        """Only the capability path is a WebSocket; no discovery, no other endpoint."""
        if request.path != self._path:
            return connection.respond(HTTPStatus.NOT_FOUND, "Not found\n")
        if self._client is not None or self.gone.is_set():
            return connection.respond(HTTPStatus.CONFLICT, "Busy\n")
        return None

    async def _serve(self, websocket: Any) -> None:
        self._client = websocket
        self._queue = asyncio.Queue()
        sender = asyncio.create_task(self._send_loop(websocket, self._queue))
        try:
            async for message in websocket:
                data = message.encode() if isinstance(message, str) else bytes(message)
                self._to_browser(data)
        except Exception:  # the client went away mid-message: the same as a close
            pass
        finally:
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sender
            self._client = None

    @staticmethod
    async def _send_loop(websocket: Any, queue: asyncio.Queue[bytes | None]) -> None:
        while (message := await queue.get()) is not None:
            await websocket.send(message.decode(errors="replace"))
        await websocket.close()

    def _to_browser(self, data: bytes) -> None:
        if self._writer is not None and not self._writer.is_closing():
            self._writer.write(data + b"\0")

    def _from_browser(self, message: bytes) -> None:
        if not self.answered.is_set() and message.startswith(b'{"id":'):
            with contextlib.suppress(ValueError):
                if json.loads(message).get("id") == _PROBE_ID:
                    self.answered.set()
                    return
        if self._client is not None:
            self._queue.put_nowait(message)

    def _browser_gone(self) -> None:
        if not self.gone.is_set():
            self.gone.set()
            self._queue.put_nowait(None)  # the client sees the socket close

    async def close(self) -> None:
        """Stop listening, drop the client and close our ends of the pipe. Never raises."""
        self._browser_gone()
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5.0)
            self._server = None
        for transport in (self._reader, self._writer):
            if transport is not None:
                transport.close()
        self._reader = self._writer = None
        for fd in (self._read_fd, self._write_fd):  # never attached (start failed early)
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._read_fd = self._write_fd = -1
