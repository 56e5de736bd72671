"""A scripted OpenAI-compatible chat-completions server, for driving agents deterministically.

Tests talk to it over real HTTP with the real ``openai`` client, so the whole client stack
(retries, timeouts, streaming, error mapping) runs without a network. Its command line is
:mod:`app.testing.server` (docs/agents.md).
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl

from app.testing.http import Connection, HTTPRequest, LoopServer, error_body
from app.testing.replies import (
    CutReply,
    DropReply,
    ErrorReply,
    RawReply,
    Reply,
    SlowReply,
    StallReply,
    TextReply,
    ToolCallsReply,
    coerce_reply,
)
from app.testing.wire import (
    CapturedRequest,
    IdentifiedCall,
    completion_body,
    stream_events,
    usage_for,
)

#: Called (on the server's thread) for a chat request when the script is empty.
Responder = Callable[["CapturedRequest"], Any]

_CHAT_PATH = re.compile(r"^(?:/v1)?/chat/completions/?$")
_AZURE_PATH = re.compile(r"^/openai/deployments/(?P<deployment>[^/]+)/chat/completions/?$")
_MODELS_PATH = re.compile(r"^(?:/v1)?/models(?:/(?P<model>[^/]+))?/?$")
_STREAM_HEADERS = (
    ("Content-Type", "text/event-stream; charset=utf-8"),
    ("Cache-Control", "no-cache"),
    ("Transfer-Encoding", "chunked"),  # h11 sends HTTP/1.0 clients the plain stream instead
)


class ScriptedLLMServer(LoopServer):
    """An OpenAI-compatible chat-completions endpoint that answers from a script.

    Each chat request takes the next reply from the script; when the script is empty the
    ``responder`` (if any) builds one from the request, else the request gets HTTP 400 (not
    5xx, so clients do not retry). Every request on every route is recorded in ``requests``
    (only the last ``keep_requests`` of them when that is set, for long benchmark runs).
    """

    label = "scripted server"

    def __init__(
        self,
        script: Iterable[Reply | str | Mapping[str, Any]] = (),
        responder: Responder | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        model: str = "scripted-model",
        on_request: Callable[[CapturedRequest], None] | None = None,
        keep_requests: int | None = None,
    ) -> None:
        super().__init__(host, port, f"scripted-llm-server-{id(self):x}")
        self._script: deque[Reply] = deque(coerce_reply(item) for item in script)
        self.responder = responder
        self.model = model
        self._on_request = on_request
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        # ``keep_requests`` bounds what is kept (long benchmarks); the count stays exact.
        self._requests: deque[CapturedRequest] = deque(maxlen=keep_requests)
        self._received = 0
        self._disconnects: list[int] = []
        self._served = 0
        self._call_ids = itertools.count(1)  # next() on a count is atomic
        self._completion_ids = itertools.count(1)

    def _on_stop(self) -> None:
        with self._changed:
            self._changed.notify_all()

    # --- public state ---------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """The URL to give an OpenAI client, ``http://127.0.0.1:<port>/v1``."""
        return f"{self.root_url}/v1"

    def push(self, *replies: Reply | str | Mapping[str, Any]) -> None:
        """Append replies to the script (safe from any thread, also while serving)."""
        items = [coerce_reply(r) for r in replies]
        with self._lock:
            self._script.extend(items)

    @property
    def requests(self) -> list[CapturedRequest]:
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

    def _record_disconnect(self, index: int) -> None:
        with self._changed:
            if index in self._disconnects:
                return
            self._disconnects.append(index)
            self._changed.notify_all()

    def wait_for_disconnects(self, n: int, timeout: float = 5.0) -> bool:
        """Block until ``n`` clients went away mid-answer; ``False`` on timeout."""
        with self._changed:
            self._changed.wait_for(lambda: len(self._disconnects) >= n or self._closing, timeout)
            return len(self._disconnects) >= n

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

    # --- request handling -----------------------------------------------------------------

    async def _respond(self, conn: Connection, request: HTTPRequest) -> bool:
        """Answer one request; returns whether the connection may carry another."""
        path, _, query_string = request.target.partition("?")
        query = dict(parse_qsl(query_string, keep_blank_values=True))

        route, allowed, deployment = "unknown", "", None
        if m := (_CHAT_PATH.match(path) or _AZURE_PATH.match(path)):
            route, allowed = "chat", "POST"
            deployment = m.groupdict().get("deployment")
        elif _MODELS_PATH.match(path):
            route, allowed = "models", "GET"

        body: Any = None
        json_problem: str | None = None
        if request.body:
            try:
                body = json.loads(request.body)
            except ValueError as exc:
                json_problem = f"request body is not valid JSON: {exc}"
        if route == "chat" and json_problem is None and not isinstance(body, dict):
            json_problem = "request body must be a JSON object"

        reply: Reply | None = None
        with self._changed:
            captured = CapturedRequest(
                index=self._received,
                method=request.method,
                path=path,
                query=query,
                headers=dict(request.headers),
                body=body,
                raw=request.body,
                route=route,
            )
            self._requests.append(captured)
            self._received += 1
            takes_reply = route == "chat" and request.method == allowed and json_problem is None
            if takes_reply and self._script:
                reply = self._script.popleft()
                self._served += 1
            served = self._served
            self._changed.notify_all()
        if self._on_request is not None:
            try:
                self._on_request(captured)
            except Exception as exc:
                self._record_error(exc)

        def plain(status: int, body: bytes, **extra: Any) -> bool:
            conn.send_plain(status, body, **extra)
            return True

        if route == "unknown":
            message = f"scripted server: no route for {request.method} {path}"
            return plain(404, error_body(message, code="unknown_url"))
        if request.method != allowed:
            message = f"scripted server: {request.method} is not allowed on {path} (use {allowed})"
            return plain(405, error_body(message), headers=[("Allow", allowed)])
        if route == "models":
            return plain(200, json.dumps(self._models_body(path)).encode())
        if json_problem is not None:
            return plain(400, error_body(f"scripted server: {json_problem}"))

        if reply is None and self.responder is not None:
            try:
                produced = self.responder(captured)
                if inspect.isawaitable(produced):
                    produced = await produced
                reply = coerce_reply(produced)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._record_error(exc)
                message = f"scripted server: the responder raised {exc!r}"
                return plain(500, error_body(message, "server_error"))
        if reply is None:
            message = (
                f"scripted server: script exhausted after {served} requests "
                "(push more replies or give a responder)"
            )
            return plain(400, error_body(message, code="script_exhausted"))
        model = captured.model or deployment or self.model
        try:
            return await self._send_reply(conn, captured, reply, model)
        except (ConnectionError, asyncio.CancelledError):
            if conn.gone.is_set() and not self._closing:  # the client hung up mid-answer
                self._record_disconnect(captured.index)
            raise

    def _models_body(self, path: str) -> dict[str, Any]:
        entry = {"id": self.model, "object": "model", "created": 0, "owned_by": "scripted"}
        m = _MODELS_PATH.match(path)
        if m and m.group("model"):
            return {**entry, "id": m.group("model")}
        return {"object": "list", "data": [entry]}

    async def _send_reply(
        self,
        conn: Connection,
        req: CapturedRequest,
        reply: Reply,
        model: str,
    ) -> bool:
        stall: StallReply | CutReply | None = None
        while isinstance(reply, SlowReply | StallReply | CutReply):
            if isinstance(reply, StallReply | CutReply):
                stall, reply = reply, reply.reply
                if isinstance(stall, StallReply) and not req.stream:
                    reply = SlowReply(stall.seconds, reply)
                continue
            if await self._client_left(conn, req.index, reply.seconds):
                return False
            reply = reply.reply
        if isinstance(reply, DropReply):
            return False
        if isinstance(reply, ErrorReply):
            body = json.dumps(reply.body()).encode("utf-8")
            conn.send_plain(reply.status, body, headers=reply.headers)
            return True
        if isinstance(reply, RawReply):
            conn.send_plain(
                reply.status, reply.body, content_type=reply.content_type, headers=reply.headers
            )
            return True
        if not isinstance(reply, TextReply | ToolCallsReply):  # pragma: no cover - guarded
            raise TypeError(f"cannot send {reply!r}")
        calls: list[IdentifiedCall] = [
            (tc, tc.id or f"call_{next(self._call_ids)}")
            for tc in (reply.calls if isinstance(reply, ToolCallsReply) else ())
        ]
        usage = usage_for(req, reply, calls)
        created = int(time.time())
        completion_id = f"chatcmpl-scripted-{next(self._completion_ids)}"
        if req.stream:
            events = stream_events(req, reply, calls, usage, model, completion_id, created)
            return await self._stream(conn, req.index, events, stall)
        data = completion_body(reply, calls, usage, model, completion_id, created)
        if isinstance(stall, CutReply):  # announce the whole body, send half, hang up
            length = str(len(data))
            head = [("Content-Type", "application/json"), ("Content-Length", length)]
            conn.send_head(200, head, data[: len(data) // 2])
            await conn.drain()
            return False
        conn.send_plain(200, data)
        return True

    async def _client_left(self, conn: Connection, index: int, seconds: float) -> bool:
        """Wait ``seconds``, ending early (and recording it) when the client goes away."""
        try:
            await asyncio.wait_for(conn.gone.wait(), seconds)
        except TimeoutError:
            return False
        self._record_disconnect(index)
        return True

    async def _stream(
        self,
        conn: Connection,
        index: int,
        events: list[bytes],
        interruption: StallReply | CutReply | None = None,
    ) -> bool:
        """Send the events; False when cut (the connection then closes mid-stream)."""
        conn.send_head(200, _STREAM_HEADERS)
        for number, event in enumerate(events):
            if interruption is not None and number == interruption.after:
                if isinstance(interruption, CutReply) or await self._client_left(
                    conn, index, interruption.seconds
                ):
                    return False
            conn.send_data(event)
            await conn.drain()
            await asyncio.sleep(0)  # let the event go out on its own and other clients run
        conn.end()
        return True
