"""HTTP/1.1 for the scripted server and the recording proxy, on h11 (framing, keep-alive,
pipelining, ``Expect: 100-continue``): ``LoopServer`` serves from its own event loop in a
background thread, so sync and async tests use it alike and a slow reply never blocks the
test's loop; one ``Connection`` per client hands complete requests, in order, to its
``_respond``."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from http.client import responses
from typing import Any, Self

import h11

MAX_HEAD = 64 * 1024
MAX_BODY = 64 * 1024 * 1024


@dataclass
class HTTPRequest:
    method: str
    target: str
    headers: dict[str, str]
    body: bytes


def error_body(
    message: str, type_: str = "invalid_request_error", code: str | None = None
) -> bytes:
    payload = {"error": {"message": message, "type": type_, "param": None, "code": code}}
    return json.dumps(payload).encode("utf-8")


class Connection(asyncio.Protocol):
    """One client connection: parses requests as bytes arrive, answers them in order."""

    def __init__(self, server: LoopServer) -> None:
        self._server = server
        self._h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
        self.transport: asyncio.Transport | None = None
        self._method = b""
        self._wake = asyncio.Event()
        self.gone = asyncio.Event()
        self.lost = False
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
        if self._h11.their_state is not h11.ERROR:
            self._h11.receive_data(data)
        self._wake.set()

    def eof_received(self) -> bool:
        if self._h11.their_state is not h11.ERROR:
            self._h11.receive_data(b"")
        self.gone.set()
        self._wake.set()
        return True  # keep the write side open to answer requests already received

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
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
    def _send(self, *events: h11.Event) -> None:
        """Frame ``events`` and write them in one piece."""
        if self.lost or self.transport is None or self.transport.is_closing():
            raise ConnectionResetError("client went away")
        if self._method == b"HEAD":  # h11 frames a HEAD answer without a body
            events = tuple(e for e in events if not isinstance(e, h11.Data))
        self.transport.write(b"".join(self._h11.send(e) or b"" for e in events))

    def send_head(
        self,
        status: int,
        headers: Iterable[tuple[str, str]],
        body: bytes = b"",
        *,
        end: bool = False,
        close: bool = False,
    ) -> None:
        """The status line, headers and the first of the body (all of it with ``end``);
        ``close`` ends the connection after this answer."""
        fields = [*headers, *([("Connection", "close")] if close else [])]
        events: list[h11.Event] = [
            h11.Response(status_code=status, headers=fields, reason=responses.get(status, ""))
        ]
        if body:
            events.append(h11.Data(data=body))
        self._send(*events, *([h11.EndOfMessage()] if end else []))

    def send_data(self, data: bytes) -> None:
        self._send(h11.Data(data=data))

    def end(self) -> None:
        self._send(h11.EndOfMessage())

    def send_plain(
        self,
        status: int,
        body: bytes,
        *,
        content_type: str = "application/json",
        headers: Iterable[tuple[str, str]] = (),
        close: bool = False,
    ) -> None:
        """A whole answer with a body of known length."""
        fields = [("Content-Type", content_type), ("Content-Length", str(len(body))), *headers]
        self.send_head(status, fields, body, end=True, close=close)

    async def drain(self) -> None:
        await self._can_write.wait()
        if self.lost:
            raise ConnectionResetError("client went away")

    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    # reading
    async def _next_event(self) -> Any:
        while (event := self._h11.next_event()) is h11.NEED_DATA:
            # Clients that send "Expect: 100-continue" wait for this before sending the body.
            if self._h11.they_are_waiting_for_100_continue:
                self._send(h11.InformationalResponse(status_code=100, headers=[]))
            self._wake.clear()
            await self._wake.wait()
        return event

    async def _read_request(self) -> HTTPRequest | None:
        """The next whole request; ``None`` once the client is done."""
        event = await self._next_event()
        if not isinstance(event, h11.Request):
            return None
        self._method = event.method
        body = bytearray()
        while isinstance(part := await self._next_event(), h11.Data):
            body += part.data
            if len(body) > MAX_BODY:
                raise h11.RemoteProtocolError("request body too large", error_status_hint=413)
        headers: dict[str, str] = {}
        for raw_name, raw_value in event.headers:
            name, value = raw_name.decode("latin-1"), raw_value.decode("latin-1")
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        return HTTPRequest(
            event.method.decode("latin-1"), event.target.decode("latin-1"), headers, bytes(body)
        )

    async def _serve(self) -> None:
        try:
            while (request := await self._read_request()) is not None:
                if not await self._server._respond(self, request) or self.lost:
                    break
                if self._h11.our_state is not h11.DONE or self._h11.their_state is not h11.DONE:
                    break
                self._h11.start_next_cycle()
        except h11.RemoteProtocolError as exc:
            body = error_body(f"scripted server: {exc}")
            with contextlib.suppress(ConnectionError):  # a request cut short by a hang-up
                self.send_plain(exc.error_status_hint, body, close=True)
        except (ConnectionError, asyncio.CancelledError):
            pass
        except Exception as exc:  # a bug here must not kill the server; tests can see it
            self._server._record_error(exc)
        finally:
            self.close()


class LoopServer:
    """Listens on ``host:port`` from a daemon thread running its own event loop; subclasses
    answer in ``_respond`` (returning whether the connection may carry another request)."""

    label = "server"  # for messages

    def __init__(self, host: str, port: int, thread_name: str) -> None:
        self._host = host
        self._requested_port = port
        self._thread_name = thread_name
        self._state_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._aio_server: asyncio.Server | None = None
        self._stopped: asyncio.Event
        self._conns: set[Connection] = set()
        self._ready = threading.Event()
        self._start_error: BaseException | None = None
        self._port: int | None = None
        self._closing = False
        self._errors: list[BaseException] = []

    async def _respond(self, conn: Connection, request: HTTPRequest) -> bool:
        raise NotImplementedError

    def _record_error(self, exc: BaseException) -> None:
        self._errors.append(exc)

    def _on_stop(self) -> None:
        """Called once by ``stop`` before the loop ends (wake whoever waits)."""

    def start(self) -> Self:
        """Bind and start serving; returns once the port is known. Calling it again is a no-op."""
        with self._state_lock:
            if self._closing:
                raise RuntimeError(f"a stopped {type(self).__name__} cannot be started again")
            if self._thread is not None:
                return self
            self._thread = threading.Thread(target=self._run, name=self._thread_name, daemon=True)
            self._thread.start()
        if not self._ready.wait(timeout=30):
            self.stop()
            raise RuntimeError(f"{self.label} did not start within 30 s")
        if self._start_error is not None:
            self._thread.join()
            raise self._start_error
        return self

    def stop(self) -> None:
        """Close every connection and the listening socket, then join the thread (idempotent)."""
        with self._state_lock:
            if self._closing:
                return
            self._closing = True
            thread, loop = self._thread, self._loop
        self._on_stop()
        if thread is None:
            return
        if loop is not None:
            try:
                loop.call_soon_threadsafe(self._begin_shutdown)
            except RuntimeError:  # the loop already closed (start failed)
                pass
        if thread is not threading.current_thread():
            thread.join(timeout=30)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        return await asyncio.to_thread(self.start)

    async def __aexit__(self, *exc_info: object) -> None:
        await asyncio.to_thread(self.stop)

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError(f"the {self.label} is not started; call start() first")
        return self._port

    @property
    def root_url(self) -> str:
        """The URL without a path (what ``AsyncAzureOpenAI(azure_endpoint=...)`` wants)."""
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"http://{host}:{self.port}"

    def _run(self) -> None:
        # The runner's close cancels what is left (the connections) and closes the loop.
        with asyncio.Runner() as runner:
            runner.run(self._serve())

    async def _serve(self) -> None:
        self._loop = loop = asyncio.get_running_loop()
        self._stopped = asyncio.Event()
        try:
            self._aio_server = await loop.create_server(
                lambda: Connection(self), self._host, self._requested_port, backlog=4096
            )
            self._port = self._aio_server.sockets[0].getsockname()[1]
        except BaseException as exc:
            self._start_error = exc
            return
        finally:
            self._ready.set()
        await self._stopped.wait()

    def _begin_shutdown(self) -> None:
        if self._aio_server is not None:
            self._aio_server.close()
        for conn in list(self._conns):
            if conn.transport is not None:
                conn.transport.abort()
        self._stopped.set()
