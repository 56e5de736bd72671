"""The A2A server's front door: what is refused before the SDK sees a request.

A Host not naming this server (DNS rebinding), a foreign Origin or a cross-site fetch (the web
UI's rules, :class:`app.web.security.AccessPolicy`); a token matching no caller; a body over
the size limit, refused with a ``413`` before anything parses it or keeps more than the limit
(a declared length at once, a chunked body as soon as it grows past the limit; the rest of a
moderately larger one is read and dropped, so the client sees the 413). The caller a request
comes from goes into the ASGI scope for :mod:`app.a2a.jsonrpc`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Literal

from starlette.datastructures import Headers
from starlette.responses import JSONResponse

from app.a2a import TOKEN_ENV
from app.a2a.identity import Caller, Callers
from app.web.security import AccessPolicy

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: Where the guard leaves the request's :class:`Caller` (in ``scope["state"]``).
CALLER_KEY = "a2a_caller"
#: The default body limit (``--max-body``): a text task with room to spare.
DEFAULT_MAX_BODY = 4 << 20
#: A refused body up to this size (or four times the limit) is read and dropped, not cut.
DISCARD_AT_LEAST = 16 << 20
#: The most of a body read (and dropped) before an answer that refuses its sender (a wrong
#: token, a foreign Host): less than a 413's, since nobody known is sending it.
REFUSED_BODY_READ = 1 << 20


def caller_of(scope: Scope) -> Caller | None:
    """The caller the guard let in (None outside a guarded request)."""
    found = scope.get("state", {}).get(CALLER_KEY)
    return found if isinstance(found, Caller) else None


class AccessGuard:
    """Refuses a request before the SDK sees it (see the module's docstring); the agent card
    alone needs no token, so that a client can learn how to authenticate."""

    def __init__(
        self,
        app: ASGIApp,
        policy: AccessPolicy,
        callers: Callers,
        *,
        public_paths: tuple[str, ...] = (),
        max_body: int = DEFAULT_MAX_BODY,
    ) -> None:
        self.app = app
        self.policy = policy
        self.callers = callers
        self.public_paths = public_paths
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal, caller = self._admit(scope)
        if refusal is not None:
            # A small body is read and dropped first: closing a connection with unread bytes
            # resets it, and a client still sending would see the reset, not the refusal.
            declared = Headers(scope=scope).get("content-length", "")
            if not declared.isdigit() or int(declared) <= REFUSED_BODY_READ:
                await _discard(receive, REFUSED_BODY_READ)
            await refusal(scope, receive, send)
            return
        scope.setdefault("state", {})[CALLER_KEY] = caller
        declared = Headers(scope=scope).get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_body:
            if int(declared) <= self._discard_limit:
                await _discard(receive, self._discard_limit)
            await self._too_large()(scope, receive, send)
            return
        outcome, body = await _read_body(receive, self.max_body)
        if outcome == "too large":
            await _discard(receive, self._discard_limit)
            await self._too_large()(scope, receive, send)
        elif outcome == "read":
            await self.app(scope, _replay(body, receive), send)

    def _admit(self, scope: Scope) -> tuple[JSONResponse | None, Caller | None]:
        headers, policy = Headers(scope=scope), self.policy
        host = headers.get("host", "")
        if not policy.host_ok(host):
            why = "This server does not answer to that Host name (DNS rebinding protection)."
            return _error(421 if host else 400, why), None
        origin = headers.get("origin")
        if origin is not None and not policy.origin_ok(origin, host):
            return _error(403, "Cross-origin requests are refused."), None
        if headers.get("sec-fetch-site") == "cross-site":
            return _error(403, "Cross-site requests are refused."), None
        auth = headers.get("authorization", "")
        token = auth[7:].strip() if auth.lower().startswith("bearer ") else None
        caller = self.callers.match(token)
        if caller is None and not (scope["method"] == "GET" and scope["path"] in self.public_paths):
            why = f"A valid access token is required: 'Authorization: Bearer <{TOKEN_ENV}>'."
            return _error(401, why, {"www-authenticate": "Bearer"}), None
        return None, caller

    @property
    def _discard_limit(self) -> int:
        """A body over the limit but under this is read and dropped before the 413, so that a
        client still sending it sees the answer, not a reset connection; a larger one is cut."""
        return max(4 * self.max_body, DISCARD_AT_LEAST)

    def _too_large(self) -> JSONResponse:
        limit = self.max_body
        shown = f"{limit >> 20} MiB" if limit >= 1 << 20 else f"{limit} bytes"
        why = f"The request body is larger than this server's limit of {shown} (--max-body)."
        return _error(413, why)


async def _discard(receive: Receive, budget: int) -> None:
    """Read and drop the rest of a body, up to ``budget`` bytes (nothing is kept)."""
    seen = 0
    while seen <= budget:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        seen += len(message.get("body", b""))
        if not message.get("more_body", False):
            return


async def _read_body(
    receive: Receive, limit: int
) -> tuple[Literal["read", "too large", "gone"], bytes]:
    """The whole body, or how reading it ended: past ``limit`` (the rest is not read), or
    the client went away."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return "gone", b""
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return "too large", b""
        chunks.append(chunk)
        if not message.get("more_body", False):
            return "read", b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """``receive`` for the app: the body read already, then the client's own messages (its
    disconnect ends a stream)."""
    pending = True

    async def replayed() -> Message:
        nonlocal pending
        if pending:
            pending = False
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """A refusal; the connection closes after it, so a body left unread is never read."""
    closing = {**(headers or {}), "connection": "close"}
    return JSONResponse({"error": message}, status, headers=closing)
