"""The web UI's HTTP routes (Starlette): the page, the JSON API, the event streams.

Every error is JSON ``{"error": message, "status": code}``; docs/web-ui.md lists the routes.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import quote

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import (
    FileResponse,
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from app import __version__
from app.config import config
from app.exceptions import SessionBusyError, SessionError
from app.logger import logger
from app.web import agui as agui_protocol
from app.web.agui import AguiInputError, AguiThread, AguiTranslator, parse_run_input
from app.web.files import Workspace
from app.web.manager import SessionManager, UnknownSession
from app.web.security import AccessPolicy, cookie_name
from app.web.session import WebSession

STATIC_DIR = Path(__file__).resolve().parent / "static"
_MAX_JSON = 1 << 20
#: Deepest nesting of arrays and objects a JSON body may have (the API needs 4).
_MAX_DEPTH = 64
_PING = 15.0
_PAGE_CSP = (
    "default-src 'self'; img-src 'self' data: blob:; style-src 'self'; "
    "script-src 'self'; frame-src 'self'; connect-src 'self'; object-src 'none'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
#: What a previewed workspace file may do: nothing (no scripts, no same origin, no fetches).
_FILE_CSP = (
    "sandbox; default-src 'none'; img-src data: 'self'; style-src 'unsafe-inline'; media-src 'self'"
)


@dataclass(kw_only=True)
class WebOptions:
    """What ``create_app`` needs besides the sessions."""

    policy: AccessPolicy
    max_upload_bytes: int


def _error(status: int, message: str, *, html: bool = False) -> Response:
    """The refusal: JSON ``{"error", "status"}``, or a short page for a browser."""
    if html:
        page = _LOGIN_PAGE.format(message=escape(message))
        headers = {"cache-control": "no-store", "content-security-policy": _LOGIN_CSP}
        return HTMLResponse(page, status, headers=headers)
    headers = {"cache-control": "no-store"}
    return JSONResponse({"error": message, "status": status}, status, headers=headers)


class SecurityMiddleware:
    """Refuses requests that fail the policy (app.web.security) before any route runs."""

    def __init__(self, app: Any, policy: AccessPolicy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        refusal = self._refusal(Request(scope)) if scope["type"] == "http" else None
        await (refusal or self.app)(scope, receive, send)

    def _refusal(self, request: Request) -> Response | None:
        headers, policy = request.headers, self.policy
        host = headers.get("host", "")
        if not policy.host_ok(host):
            return _error(
                421 if host else 400,
                "This server does not answer to that Host name (a protection against "
                "DNS rebinding). Open it as http://127.0.0.1:<port>/ or add the name "
                "to [web] allowed_hosts.",
            )
        origin = headers.get("origin")
        if origin is not None and not policy.origin_ok(origin, host):
            return _error(
                403,
                "Cross-origin requests are refused: the Origin header does not match this server.",
            )
        if headers.get("sec-fetch-site") == "cross-site":
            return _error(403, "Cross-site requests are refused.")
        if policy.token is None:
            return None
        given = request.query_params.get("token") or None
        html = "text/html" in headers.get("accept", "")
        if request.url.path == "/" and given is not None:
            if not policy.token_ok(given):
                return _error(401, "Wrong access token. " + _LOGIN_HINT, html=html)
            # Trade ``/?token=`` for the cookie, and drop the token from the address bar.
            cookie = f"{cookie_name(policy.port)}={policy.token}; Path=/; HttpOnly; SameSite=Strict"
            extra = {"set-cookie": cookie, "cache-control": "no-store"}
            return RedirectResponse("/", 303, headers={**extra, "referrer-policy": "no-referrer"})
        auth = headers.get("authorization", "")
        token = auth[7:].strip() if auth.lower().startswith("bearer ") else None
        if not policy.token_ok(token or request.cookies.get(cookie_name(policy.port))):
            return _error(401, "An access token is required. " + _LOGIN_HINT, html=html)
        return None


_LOGIN_HINT = (
    "Log in by opening the address the server printed when it started (it ends in "
    "?token=...); API clients send 'Authorization: Bearer <token>'. The token is the "
    "OPENMANUS_WEB_TOKEN you set, or a new random one at every start."
)
_LOGIN_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>OpenManus: log in</title></head>
<body style="font-family: sans-serif; max-width: 40em; margin: 3em auto">
<h1>OpenManus web UI: log in</h1><p>{message}</p></body></html>
"""
_LOGIN_CSP = "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'"


async def _json_body(
    request: Request, limit: int = _MAX_JSON, too_large: str = "The JSON body is too large."
) -> dict[str, Any]:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise HTTPException(413, too_large)
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > limit:
            raise HTTPException(413, too_large)
    if not raw:
        return {}
    try:
        text = bytes(raw).decode("utf-8")
    except UnicodeDecodeError as e:
        raise HTTPException(400, f"The body is not UTF-8 (byte {e.start}).") from None
    try:
        body = json.loads(text)
    except RecursionError:  # e.g. 100 000 '[': the parser's own limit, not a server fault
        raise HTTPException(
            400, f"The JSON body is nested too deeply (limit {_MAX_DEPTH})."
        ) from None
    except ValueError as e:
        raise HTTPException(400, f"The body is not valid JSON: {e}") from None
    _check_tree(body)
    if not isinstance(body, dict):
        raise HTTPException(400, "The body must be a JSON object.")
    return body


def _check_tree(value: Any) -> None:
    """Refuse what would fail later, far from the request: nesting deeper than
    ``_MAX_DEPTH`` (re-encoding it recurses) and lone surrogates (``"\\ud800"``: no UTF-8
    encoding exists, so the event log could not be written)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            _check_text(item)
            continue
        if not isinstance(item, dict | list):
            continue
        if depth > _MAX_DEPTH:
            raise HTTPException(400, f"The JSON body is nested too deeply (limit {_MAX_DEPTH}).")
        if isinstance(item, dict):
            for key, child in item.items():
                _check_text(key)
                stack.append((child, depth + 1))
        else:
            stack.extend((child, depth + 1) for child in item)


def _check_text(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise HTTPException(
            400, "The JSON body holds a lone surrogate (\\ud800-\\udfff): not valid text."
        ) from None


def _prompt_of(body: dict[str, Any], *, required: bool) -> str | None:
    prompt = body.get("prompt")
    if prompt is None and not required:
        return None
    if not isinstance(prompt, str) or not prompt.strip():
        raise HTTPException(400, "`prompt` must be a non-empty string.")
    if len(prompt) > 200_000:
        raise HTTPException(413, "The prompt is too long.")
    return prompt.strip()


def _sse(entry: dict[str, Any]) -> bytes:
    data = json.dumps(entry, ensure_ascii=False, default=str)
    return f"id: {entry['id']}\ndata: {data}\n\n".encode()


def create_app(manager: SessionManager, options: WebOptions) -> Any:
    """The ASGI app: routes behind the security middleware."""
    # Tells a page that reconnects whether this is still the server it knew: a restarted one
    # numbers its events anew, so the page replays the session instead of resuming.
    instance = secrets.token_hex(8)

    async def session_of(request: Request, *, open_stored: bool = False) -> WebSession:
        sid = request.path_params["sid"]
        try:
            if open_stored:
                return await manager.open(sid)
            return manager.live(sid)
        except UnknownSession as e:
            raise HTTPException(404, str(e)) from None
        except SessionBusyError as e:
            raise HTTPException(409, str(e)) from None
        except SessionError as e:
            raise HTTPException(400, str(e)) from None

    async def info(request: Request) -> Response:
        settings = config.llm.get("default")
        return JSONResponse(
            {
                "version": __version__,
                "model": settings.model if settings else "",
                "profiles": sorted(config.llm),
                "max_upload_bytes": options.max_upload_bytes,
                "remote": options.policy.remote,
                "instance": instance,
            }
        )

    async def list_sessions(request: Request) -> Response:
        return JSONResponse({"sessions": await manager.listing()})

    async def new_session(request: Request) -> Response:
        body = await _json_body(request)
        mode = body.get("mode", "agent")
        if mode not in ("agent", "flow"):
            raise HTTPException(400, "`mode` must be 'agent' or 'flow'.")
        prompt = _prompt_of(body, required=False)
        session = await manager.create(mode)
        if prompt is not None:
            session.start(prompt)
        return JSONResponse(session.info(), status_code=201)

    async def open_session(request: Request) -> Response:
        return JSONResponse((await session_of(request, open_stored=True)).info())

    async def run_task(request: Request) -> Response:
        body = await _json_body(request)
        prompt = _prompt_of(body, required=True)
        session = await session_of(request, open_stored=True)
        session.start(prompt)
        return JSONResponse(session.info(), status_code=202)

    async def continue_task(request: Request) -> Response:
        session = await session_of(request, open_stored=True)
        if not session.incomplete:
            raise HTTPException(409, "This session has no task cut short to carry on.")
        session.start(None)
        return JSONResponse(session.info(), status_code=202)

    async def stop(request: Request) -> Response:
        session = await session_of(request)
        stopped = await session.stop()
        return JSONResponse({"stopped": stopped, "session": session.info()})

    async def answer(request: Request) -> Response:
        body = await _json_body(request)
        session = await session_of(request)
        qid, text = body.get("question_id"), body.get("answer")
        if not isinstance(qid, str) or not isinstance(text, str):
            raise HTTPException(400, "`question_id` and `answer` must be strings.")
        if not session.answer(qid, text):
            raise HTTPException(404, f"No question {qid!r} is waiting for an answer.")
        return JSONResponse({"answered": qid})

    async def events(request: Request) -> Response:
        session = await session_of(request)
        raw = request.headers.get("last-event-id") or request.query_params.get("after") or "0"
        if not raw.isdigit():
            raise HTTPException(400, "Last-Event-ID must be an event number.")
        return StreamingResponse(
            _stream(session, int(raw), request),
            media_type="text/event-stream",
            headers={"cache-control": "no-store", "x-accel-buffering": "no"},
        )

    async def list_files(request: Request) -> Response:
        session = await session_of(request, open_stored=True)
        listing = await Workspace(session.workspace).listing(request.query_params.get("path"))
        return JSONResponse(listing)

    async def recent_files(request: Request) -> Response:
        session = await session_of(request, open_stored=True)
        raw = request.query_params.get("since")
        try:
            since = float(raw) if raw is not None else session.created
        except ValueError:
            raise HTTPException(400, "`since` must be a time in seconds since the epoch.") from None
        if since != since:  # NaN compares false with every mtime: refuse it plainly
            raise HTTPException(400, "`since` must be a time in seconds since the epoch.")
        return JSONResponse(await Workspace(session.workspace).recent(since))

    async def get_file(request: Request) -> Response:
        session = await session_of(request, open_stored=True)
        ws = Workspace(session.workspace)
        fd, size, media, name = await ws.open(request.query_params.get("path"))
        download = request.query_params.get("download") == "1"
        head = b""
        if not download:
            head = await asyncio.to_thread(os.pread, fd, 4096, 0)
        served = "application/octet-stream" if download else ws.inline_type(media, head)
        disposition = "attachment" if download or served == "application/octet-stream" else "inline"
        quoted = json.dumps(name.encode("ascii", "replace").decode())[1:-1]
        headers = {
            "content-length": str(size),
            "content-disposition": f'{disposition}; filename="{quoted}"; '
            f"filename*=UTF-8''{quote(name)}",
            "content-security-policy": _FILE_CSP,
            "x-content-type-options": "nosniff",
            "cache-control": "no-store",
        }
        return StreamingResponse(ws.chunks(fd), media_type=served, headers=headers)

    async def upload(request: Request) -> Response:
        session = await session_of(request, open_stored=True)
        declared = request.headers.get("content-length")
        result = await Workspace(session.workspace).upload(
            request.query_params.get("path"),
            request.stream(),
            limit=options.max_upload_bytes,
            declared=int(declared) if declared and declared.isdigit() else None,
        )
        session.note("file_uploaded", path=result["path"], size=result["size"])
        return JSONResponse(result, status_code=201)

    async def screenshot(request: Request) -> Response:
        session = await session_of(request)
        if session.screenshot is None:
            raise HTTPException(404, "No screenshot yet.")
        return Response(
            session.screenshot,
            media_type="image/png",
            headers={"cache-control": "no-store", "content-security-policy": _FILE_CSP},
        )

    threads: dict[str, AguiThread] = {}  # AG-UI thread id -> its session and state

    async def agui(request: Request) -> Response:
        body = await _json_body(request, agui_protocol.MAX_BODY, _AGUI_TOO_LARGE)
        thread_id = body.get("threadId", body.get("thread_id"))
        thread = threads.get(thread_id) if isinstance(thread_id, str) else None
        try:
            run = parse_run_input(body, thread.seen if thread is not None else ())
        except AguiInputError as e:
            raise HTTPException(422, str(e)) from None
        new = False
        if thread is None or thread.session.id not in manager.sessions:
            try:  # a thread id that is a session id opens that session (also after a restart)
                session = await manager.open(thread.session.id if thread else run.thread_id)
            except UnknownSession:
                session, new = await manager.create(run.mode), True
            except SessionBusyError as e:
                raise HTTPException(409, str(e)) from None
            if thread is None:  # (two first runs at once: one thread, the other gets a 409)
                thread = threads.setdefault(run.thread_id, AguiThread(run.thread_id, session))
            else:
                thread.session = session
        try:
            start = await thread.begin(run, new=new)
        except AguiInputError as e:
            raise HTTPException(422, str(e)) from None
        except SessionBusyError as e:
            raise HTTPException(409, str(e)) from None
        thread.seen.update(run.message_ids)
        translator = AguiTranslator(
            run.thread_id,
            run.run_id,
            client_tools=thread.tool_names,
            answered=thread.answered,
            emitted_ids=thread.seen,
        )
        return StreamingResponse(
            _agui_stream(thread, start, translator, request),
            media_type="text/event-stream",
            headers={"cache-control": "no-store", "x-accel-buffering": "no"},
        )

    async def page(request: Request) -> Response:
        return FileResponse(
            STATIC_DIR / "index.html",
            headers={
                "content-security-policy": _PAGE_CSP,
                "cache-control": "no-store",
                "referrer-policy": "no-referrer",
                "x-content-type-options": "nosniff",
            },
        )

    async def favicon(request: Request) -> Response:
        return FileResponse(
            STATIC_DIR / "favicon.svg",
            media_type="image/svg+xml",
            headers={"content-security-policy": _FILE_CSP, "x-content-type-options": "nosniff"},
        )

    async def busy(request: Request, exc: Exception) -> Response:
        return _error(409, str(exc))

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return _error(exc.status_code, str(exc.detail))

    async def server_error(request: Request, exc: Exception) -> Response:
        logger.exception(f"web: {request.method} {request.url.path} failed")
        return _error(500, f"Internal error: {type(exc).__name__}")

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await manager.shutdown()

    routes = [
        Route("/", page),
        Route("/favicon.ico", favicon),
        Route("/api/info", info),
        Route("/api/sessions", list_sessions),
        Route("/api/sessions", new_session, methods=["POST"]),
        Route("/api/sessions/{sid}/open", open_session, methods=["POST"]),
        Route("/api/sessions/{sid}/tasks", run_task, methods=["POST"]),
        Route("/api/sessions/{sid}/continue", continue_task, methods=["POST"]),
        Route("/api/sessions/{sid}/stop", stop, methods=["POST"]),
        Route("/api/sessions/{sid}/answer", answer, methods=["POST"]),
        Route("/api/sessions/{sid}/events", events),
        Route("/api/sessions/{sid}/files", list_files),
        Route("/api/sessions/{sid}/file", get_file),
        Route("/api/sessions/{sid}/recent", recent_files),
        Route("/api/sessions/{sid}/upload", upload, methods=["PUT", "POST"]),
        Route("/api/sessions/{sid}/screenshot", screenshot),
        Route("/api/agui", agui, methods=["POST"]),
        Mount("/static", StaticFiles(directory=STATIC_DIR), name="static"),
    ]
    app = Starlette(
        routes=routes,
        exception_handlers={
            SessionBusyError: busy,
            HTTPException: http_error,
            Exception: server_error,
        },
        lifespan=lifespan,
    )
    app.state.manager = manager
    return SecurityMiddleware(app, options.policy)


async def _follow(
    session: WebSession, last_id: int, request: Request
) -> AsyncGenerator[list[dict[str, Any]] | None, None]:
    """Batches of the session's entries after ``last_id``, then live ones; None every few
    idle seconds (a ping keeps proxies from closing the stream). The task never depends on
    this reader."""
    while True:
        pending = session.log.since(last_id)
        if pending:  # one write for everything ready: fewer syscalls under load
            last_id = pending[-1]["id"]
            yield pending
        if session.log.closed:
            return
        if not await session.log.wait(last_id, _PING):
            if await request.is_disconnected():
                return
            yield None


async def _stream(session: WebSession, last_id: int, request: Request) -> AsyncIterator[bytes]:
    yield b"retry: 1000\n\n"
    async for batch in _follow(session, last_id, request):
        yield b": ping\n\n" if batch is None else b"".join(_sse(entry) for entry in batch)


async def _agui_stream(
    thread: AguiThread, last_id: int, translator: AguiTranslator, request: Request
) -> AsyncIterator[bytes]:
    """The run's events until RUN_FINISHED / RUN_ERROR (or a pause for the client's tools);
    a client that closes the stream first (``abortRun()``) stops the task."""
    thread.released.clear()
    try:
        for event in translator.start():
            yield _agui_data(event)
        async with aclosing(_follow(thread.session, last_id, request)) as batches:
            async for batch in batches:
                for entry in batch or ():
                    for event in translator.translate(entry):
                        yield _agui_data(event)
                    if translator.finished:
                        return
                if batch is None:
                    yield b": ping\n\n"
    finally:
        thread.released.set()
        if not translator.finished and not thread.session.log.closed:
            thread.abort()


def _agui_data(event: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(event, ensure_ascii=False, default=str)}\n\n".encode()


_AGUI_TOO_LARGE = (
    f"The RunAgentInput is larger than the {agui_protocol.MAX_BODY >> 20} MiB /api/agui "
    "accepts. The server keeps each thread's history: send only the messages since the "
    "last run (or start a new thread)."
)
