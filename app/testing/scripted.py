"""A scripted OpenAI-compatible chat-completions server, for driving agents deterministically.

Tests talk to it over real HTTP with the real ``openai`` client, so the whole client stack
(retries, timeouts, streaming, error mapping) runs without a network. Its command line is
:mod:`app.testing.server` (docs/agents.md).
"""

from __future__ import annotations

import itertools
import json
import re
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl

from app.testing.http import Connection, HTTPRequest, error_body
from app.testing.replies import (
    CutReply,
    DropReply,
    ErrorReply,
    RawReply,
    Reply,
    TextReply,
    ToolCallsReply,
)
from app.testing.scripted_base import ResponderFailed, ScriptedServer
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


class ScriptedLLMServer(ScriptedServer[CapturedRequest]):
    """An OpenAI-compatible chat-completions endpoint that answers from a script.

    Each chat request takes the next reply from the script; when the script is empty the
    ``responder`` (if any) builds one from the request, else the request gets HTTP 400 (not
    5xx, so clients do not retry). Every request on every route is recorded in ``requests``
    (only the last ``keep_requests`` of them when that is set, for long benchmark runs).
    """

    label = "scripted server"
    stream_errors = False

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
        super().__init__(
            script,
            responder,
            host=host,
            port=port,
            thread_name=f"scripted-llm-server-{id(self):x}",
            on_request=on_request,
            keep_requests=keep_requests,
        )
        self.model = model
        self._call_ids = itertools.count(1)  # next() on a count is atomic
        self._completion_ids = itertools.count(1)

    @property
    def base_url(self) -> str:
        """The URL to give an OpenAI client, ``http://127.0.0.1:<port>/v1``."""
        return f"{self.root_url}/v1"

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

        takes_reply = route == "chat" and request.method == allowed and json_problem is None
        captured, reply = self._capture(
            lambda index: CapturedRequest(
                index=index,
                method=request.method,
                path=path,
                query=query,
                headers=dict(request.headers),
                body=body,
                raw=request.body,
                route=route,
            ),
            takes_reply=takes_reply,
        )
        served = self._served

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

        try:
            reply = await self._reply_for(captured, reply)
        except ResponderFailed as exc:
            message = f"scripted server: the responder raised {exc}"
            return plain(500, error_body(message, "server_error"))
        if reply is None:
            message = (
                f"scripted server: script exhausted after {served} requests "
                "(push more replies or give a responder)"
            )
            return plain(400, error_body(message, code="script_exhausted"))
        model = captured.model or deployment or self.model
        with self._watching(conn, captured.index):
            return await self._send_reply(conn, captured, reply, model)

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
        scripted: Reply,
        model: str,
    ) -> bool:
        reply, stall = await self._unwrap(conn, req.index, scripted, req.stream)
        if reply is None or isinstance(reply, DropReply):
            return False
        if isinstance(reply, ErrorReply):
            body = json.dumps(reply.body()).encode("utf-8")
            conn.send_plain(reply.status, body, headers=reply.headers)
            return True
        if isinstance(reply, RawReply):
            return self._send_raw(conn, reply)
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
            return await self._stream(conn, req.index, _STREAM_HEADERS, events, stall)
        data = completion_body(reply, calls, usage, model, completion_id, created)
        if isinstance(stall, CutReply):  # announce the whole body, send half, hang up
            return await self._send_cut(conn, data)
        conn.send_plain(200, data)
        return True
