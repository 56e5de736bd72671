"""What every scripted server shares, whatever wire format it speaks: the script of replies
(then the responder), the log of requests, the clients that left mid-answer, waiting for
either, and the timing of an answer (slow, stalled, cut, an error mid-stream). Each server
(OpenAI's chat completions, Anthropic's Messages, Bedrock's Converse) keeps only its routes,
its checks and its bytes."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, ClassVar, Generic, TypeVar

from app.testing.http import Connection, LoopServer
from app.testing.replies import (
    CutReply,
    ErrorReply,
    RawReply,
    Reply,
    SlowReply,
    StallReply,
    StreamErrorReply,
    coerce_reply,
)

#: A request as a server captured it (``CapturedRequest``, ``BedrockRequest``).
R = TypeVar("R")

#: What breaks into an answer after some of its events: a stall, a cut, an error.
Interruption = StallReply | CutReply | StreamErrorReply


class ResponderFailed(Exception):
    """The responder raised (the error is in ``errors``); the server answers with a 500."""


class ScriptedServer(LoopServer, Generic[R]):
    """A :class:`LoopServer` that answers from a script: each request that takes a reply gets
    the next one, else the ``responder``'s. Every request is recorded (only the last
    ``keep_requests`` when that is set; the count stays exact), and every client that went
    away before its answer was complete."""

    #: Whether the server sends a ``StreamErrorReply`` (an error event mid-stream).
    stream_errors: ClassVar[bool] = True

    def __init__(
        self,
        script: Iterable[Reply | str | Mapping[str, Any]],
        responder: Callable[[R], Any] | None,
        *,
        host: str,
        port: int,
        thread_name: str,
        on_request: Callable[[R], None] | None = None,
        keep_requests: int | None = None,
    ) -> None:
        super().__init__(host, port, thread_name)
        self._script: deque[Reply] = deque(coerce_reply(item) for item in script)
        self.responder = responder
        self._on_request = on_request
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._requests: deque[R] = deque(maxlen=keep_requests)
        self._received = 0
        self._served = 0
        self._disconnects: list[int] = []

    def _on_stop(self) -> None:
        with self._changed:
            self._changed.notify_all()

    # --- public state ---------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """The URL to give a client or a profile's ``base_url`` (an SDK adds its own path,
        such as Anthropic's ``/v1``)."""
        return self.root_url

    def push(self, *replies: Reply | str | Mapping[str, Any]) -> None:
        """Append replies to the script (safe from any thread, also while serving)."""
        items = [coerce_reply(r) for r in replies]
        with self._lock:
            self._script.extend(items)

    @property
    def requests(self) -> list[R]:
        """A snapshot of every request received so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    @property
    def remaining(self) -> int:
        """How many scripted replies have not been used yet."""
        with self._lock:
            return len(self._script)

    @property
    def errors(self) -> list[BaseException]:
        """Exceptions raised inside the server (a failing responder, say); empty when healthy."""
        with self._lock:
            return list(self._errors)

    @property
    def disconnects(self) -> list[int]:
        """Indexes of the requests whose client went away before their answer was complete
        (what a real server sees when a client gives up on a slow or stalled answer)."""
        with self._lock:
            return list(self._disconnects)

    def wait_for_requests(self, n: int, timeout: float = 5.0) -> bool:
        """Block until ``n`` requests have arrived; ``False`` on timeout or when stopped.

        Blocks the calling thread: from async code use :meth:`wait_for_requests_async`.
        """
        with self._changed:
            self._changed.wait_for(lambda: self._received >= n or self._closing, timeout)
            return self._received >= n

    async def wait_for_requests_async(self, n: int, timeout: float = 5.0) -> bool:
        """:meth:`wait_for_requests` for async code, waiting in a thread: the loop stays free."""
        return await asyncio.to_thread(self.wait_for_requests, n, timeout)

    def wait_for_disconnects(self, n: int, timeout: float = 5.0) -> bool:
        """Block until ``n`` clients went away mid-answer; ``False`` on timeout."""
        with self._changed:
            self._changed.wait_for(lambda: len(self._disconnects) >= n or self._closing, timeout)
            return len(self._disconnects) >= n

    # --- for the servers: the script and the log ------------------------------------------

    def _capture(
        self, build: Callable[[int], R], *, takes_reply: bool = False
    ) -> tuple[R, Reply | None]:
        """Record the request ``build`` makes from its index and, when it ``takes_reply``, take
        the next scripted reply with it (None when the script is empty); then tell
        ``on_request``."""
        reply: Reply | None = None
        with self._changed:
            captured = build(self._received)
            self._requests.append(captured)
            self._received += 1
            if takes_reply and self._script:
                reply = self._script.popleft()
                self._served += 1
            self._changed.notify_all()
        if self._on_request is not None:
            try:
                self._on_request(captured)
            except Exception as exc:
                self._record_error(exc)
        return captured, reply

    def _next_reply(self) -> Reply | None:
        """The next scripted reply for a request captured earlier (None when none is left)."""
        with self._lock:
            if self._script:
                self._served += 1
                return self._script.popleft()
        return None

    async def _reply_for(self, captured: R, scripted: Reply | None) -> Reply | None:
        """``scripted``, else the responder's reply to ``captured`` (None without one). A
        failing responder is recorded in ``errors`` and raised as :class:`ResponderFailed`."""
        if scripted is not None or self.responder is None:
            return scripted
        try:
            produced = self.responder(captured)
            if inspect.isawaitable(produced):
                produced = await produced
            return coerce_reply(produced)
        except Exception as exc:
            self._record_error(exc)
            raise ResponderFailed(repr(exc)) from exc

    # --- for the servers: clients that leave ----------------------------------------------

    def _record_disconnect(self, index: int) -> None:
        with self._changed:
            if index in self._disconnects:
                return
            self._disconnects.append(index)
            self._changed.notify_all()

    @contextlib.contextmanager
    def _watching(self, conn: Connection, index: int) -> Iterator[None]:
        """Around an answer: a client that hangs up in the middle of it is recorded."""
        try:
            yield
        except (ConnectionError, asyncio.CancelledError):
            if conn.gone.is_set() and not self._closing:
                self._record_disconnect(index)
            raise

    async def _client_left(self, conn: Connection, index: int, seconds: float) -> bool:
        """Wait ``seconds``, ending early (and recording it) when the client goes away."""
        try:
            await asyncio.wait_for(conn.gone.wait(), seconds)
        except TimeoutError:
            return False
        self._record_disconnect(index)
        return True

    # --- for the servers: the timing of an answer -----------------------------------------

    async def _unwrap(
        self, conn: Connection, index: int, reply: Reply, stream: bool
    ) -> tuple[Reply | None, Interruption | None]:
        """The reply to send and what interrupts it. A slow reply is waited out (None when the
        client left meanwhile); a stall or a cut is the interruption (a stall before a plain
        answer, a wait); a stream error interrupts a stream that has a reply to begin, else
        its error is the reply."""
        interruption: Interruption | None = None
        kinds = SlowReply | StallReply | CutReply | StreamErrorReply
        while isinstance(reply, kinds):
            if isinstance(reply, StreamErrorReply):
                if not self.stream_errors:
                    break
                interruption = reply
                reply = reply.reply if stream and reply.reply is not None else reply.error
            elif isinstance(reply, StallReply | CutReply):
                interruption, reply = reply, reply.reply
                if isinstance(interruption, StallReply) and not stream:
                    reply = SlowReply(interruption.seconds, reply)
            elif await self._client_left(conn, index, reply.seconds):
                return None, interruption
            else:
                reply = reply.reply
        return reply, interruption

    @staticmethod
    def _send_raw(conn: Connection, reply: RawReply) -> bool:
        """A scripted response sent as it is (any status, body, content type and headers)."""
        conn.send_plain(
            reply.status, reply.body, content_type=reply.content_type, headers=reply.headers
        )
        return True

    @staticmethod
    async def _send_cut(
        conn: Connection, data: bytes, headers: Iterable[tuple[str, str]] = ()
    ) -> bool:
        """A plain answer cut short: its whole length announced, half of it sent, then the
        connection closed (returns False: the connection carries nothing more)."""
        head = [("Content-Type", "application/json"), ("Content-Length", str(len(data)))]
        conn.send_head(200, [*head, *headers], data[: len(data) // 2])
        await conn.drain()
        return False

    async def _stream(
        self,
        conn: Connection,
        index: int,
        head: Iterable[tuple[str, str]],
        events: list[bytes],
        interruption: Interruption | None,
        error_event: Callable[[ErrorReply], bytes] | None = None,
    ) -> bool:
        """Send ``events`` one by one after ``head``; False when cut or left (the connection
        then closes mid-stream). A stream error sends its ``error_event`` and ends."""
        conn.send_head(200, head)
        for number, event in enumerate(events):
            if interruption is not None and number == interruption.after:
                if isinstance(interruption, CutReply):
                    return False
                if isinstance(interruption, StreamErrorReply):
                    if error_event is None:
                        raise TypeError(f"the {self.label} cannot send a stream error")
                    conn.send_data(error_event(interruption.error))
                    conn.end()
                    return True
                if await self._client_left(conn, index, interruption.seconds):
                    return False
            conn.send_data(event)
            await conn.drain()
            await asyncio.sleep(0)  # let the event go out on its own and other clients run
        conn.end()
        return True
