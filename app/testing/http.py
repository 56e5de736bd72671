"""A minimal HTTP/1.1 server side for the scripted LLM server: request framing (Content-Length
and chunked bodies, keep-alive, ``Expect: 100-continue``) and one asyncio protocol per
connection handing complete requests, in order, to ``ScriptedLLMServer._respond``.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

__all__ = [
    "BadRequest",
    "Connection",
    "HTTPRequest",
    "error_body",
    "parse_request",
    "reason_phrase",
    "resolve_future",
]

MAX_HEAD = 64 * 1024
MAX_BODY = 64 * 1024 * 1024


class BadRequest(Exception):
    """The bytes on a connection are not a request we can answer; reply and close."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class HTTPRequest:
    method: str
    target: str
    version: str
    headers: dict[str, str]
    body: bytes


def _parse_head(head: bytes) -> tuple[str, str, str, dict[str, str]]:
    try:
        text = head.decode("latin-1")
    except UnicodeDecodeError as exc:  # pragma: no cover - latin-1 decodes anything
        raise BadRequest(400, "undecodable request head") from exc
    lines = text.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1.") or not parts[0].isalpha():
        raise BadRequest(400, f"malformed request line: {lines[0][:100]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise BadRequest(400, f"malformed header line: {line[:100]!r}")
        key = name.lower()
        value = value.strip()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return parts[0].upper(), parts[1], parts[2], headers


def _parse_chunked(buf: bytearray, start: int) -> tuple[bytes, int] | None:
    """Decode a chunked body beginning at ``start``; ``None`` while it is incomplete."""
    body = bytearray()
    pos = start
    while True:
        eol = buf.find(b"\r\n", pos)
        if eol < 0:
            return None
        size_text = bytes(buf[pos:eol]).split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError as exc:
            raise BadRequest(400, "malformed chunk size") from exc
        if size < 0:
            raise BadRequest(400, "malformed chunk size")
        if len(body) + size > MAX_BODY:
            raise BadRequest(413, "request body too large")
        pos = eol + 2
        if size == 0:
            # Skip trailers up to the blank line that ends the message.
            while True:
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    return None
                if eol == pos:
                    return bytes(body), eol + 2
                pos = eol + 2
        if len(buf) < pos + size + 2:
            return None
        body += buf[pos : pos + size]
        if buf[pos + size : pos + size + 2] != b"\r\n":
            raise BadRequest(400, "malformed chunk terminator")
        pos += size + 2


def parse_request(buf: bytearray) -> HTTPRequest | None:
    """Take one complete request off the front of ``buf``; ``None`` if more bytes are needed."""
    while buf.startswith(b"\r\n"):  # tolerated before a request line (RFC 9112 2.2)
        del buf[:2]
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        if len(buf) > MAX_HEAD:
            raise BadRequest(431, "request head too large")
        return None
    if end > MAX_HEAD:
        raise BadRequest(431, "request head too large")
    method, target, version, headers = _parse_head(bytes(buf[:end]))
    start = end + 4
    if "chunked" in headers.get("transfer-encoding", "").lower():
        decoded = _parse_chunked(buf, start)
        if decoded is None:
            return None
        body, consumed = decoded
    else:
        try:
            length = int(headers.get("content-length", "0") or "0")
        except ValueError as exc:
            raise BadRequest(400, "malformed Content-Length") from exc
        if length < 0:
            raise BadRequest(400, "malformed Content-Length")
        if length > MAX_BODY:
            raise BadRequest(413, "request body too large")
        if len(buf) < start + length:
            return None
        body, consumed = bytes(buf[start : start + length]), start + length
    del buf[:consumed]
    return HTTPRequest(method, target, version, headers, body)


def resolve_future(future: asyncio.Future[bool], result: bool) -> None:
    if not future.done():
        future.set_result(result)


def reason_phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


def error_body(
    message: str, type_: str = "invalid_request_error", code: str | None = None
) -> bytes:
    payload = {"error": {"message": message, "type": type_, "param": None, "code": code}}
    return json.dumps(payload).encode("utf-8")


class Connection(asyncio.Protocol):
    """One client connection: parses requests as bytes arrive, answers them in order."""

    def __init__(self, server: Any) -> None:
        self._server = server
        self.transport: asyncio.Transport | None = None
        self._buf = bytearray()
        self._pending: deque[HTTPRequest | BadRequest] = deque()
        self._wake = asyncio.Event()
        self.gone = asyncio.Event()
        self._eof = False
        self.lost = False
        self._broken = False
        self._continue_sent = False
        self._can_write = asyncio.Event()
        self._can_write.set()
        self._task: asyncio.Task[None] | None = None

    # protocol callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self._server._conns.add(self)
        self._task = asyncio.get_running_loop().create_task(self._serve())

    def data_received(self, data: bytes) -> None:
        if self._broken:
            return
        self._buf += data
        while True:
            try:
                request = parse_request(self._buf)
            except BadRequest as exc:
                self._broken = True
                self._buf.clear()
                self._pending.append(exc)
                break
            if request is None:
                self._maybe_continue()
                break
            self._continue_sent = False
            self._pending.append(request)
        self._wake.set()

    def _maybe_continue(self) -> None:
        # Clients that send "Expect: 100-continue" wait for this before sending the body.
        if self._continue_sent or self.transport is None:
            return
        end = self._buf.find(b"\r\n\r\n")
        if end >= 0 and b"100-continue" in bytes(self._buf[:end]).lower():
            self._continue_sent = True
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def eof_received(self) -> bool:
        self._eof = True
        self.gone.set()
        self._wake.set()
        return True  # keep the write side open to answer requests already received

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self._eof = True
        self.gone.set()
        self._wake.set()
        self._can_write.set()
        self._server._conns.discard(self)
        if self._task is not None and not self._task.done():
            self._task.cancel()

    def pause_writing(self) -> None:
        self._can_write.clear()

    def resume_writing(self) -> None:
        self._can_write.set()

    # writing
    def write(self, data: bytes) -> None:
        if self.lost or self.transport is None or self.transport.is_closing():
            raise ConnectionResetError("client went away")
        self.transport.write(data)

    async def drain(self) -> None:
        await self._can_write.wait()
        if self.lost:
            raise ConnectionResetError("client went away")

    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    async def _serve(self) -> None:
        try:
            while True:
                if not self._pending:
                    if self._eof:
                        break
                    self._wake.clear()
                    await self._wake.wait()
                    continue
                item = self._pending.popleft()
                if isinstance(item, BadRequest):
                    self._server._send_plain(
                        self,
                        item.status,
                        error_body(f"scripted server: {item.message}"),
                        keep_alive=False,
                    )
                    break
                if not await self._server._respond(self, item) or self.lost:
                    break
        except (ConnectionError, asyncio.CancelledError):
            pass
        except Exception as exc:  # a bug here must not kill the server; tests can see it
            self._server._record_error(exc)
        finally:
            self.close()
