"""Who may talk to the web UI: Host and Origin checks, and the access token (docs/web-ui.md).

* **Host** must name this server (loopback, the bound address, ``[web] allowed_hosts``; any IP
  when remote): a DNS-rebinding page reaches us under *its* name and is refused.
* **Origin**, when sent, must be ours: a page elsewhere can neither post tasks nor read streams.
* **Token** on every bind (other users, programs and the agent's own browser reach 127.0.0.1
  too): ``Authorization: Bearer`` or the per-port ``HttpOnly; SameSite=Strict`` cookie that
  ``/?token=...`` sets before redirecting to ``/`` (EventSource cannot send headers).
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from html import escape
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs, urlsplit

__all__ = ["COOKIE", "AccessPolicy", "SecurityMiddleware", "cookie_name", "is_loopback"]

#: The cookie's name, followed by ``_<port>``.
COOKIE = "openmanus_token"
Scope = MutableMapping[str, Any]
ASGIApp = Callable[
    [Scope, Callable[..., Awaitable[Any]], Callable[..., Awaitable[Any]]], Awaitable[None]
]


def cookie_name(port: int) -> str:
    """Per port: two web UIs on one host must not overwrite each other's cookie."""
    return f"{COOKIE}_{port}"


def is_loopback(host: str) -> bool:
    if host in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _split_host(value: str) -> tuple[str, int | None]:
    """``host[:port]`` (IPv6 in brackets) -> (lower-case host without brackets, port)."""
    try:
        parts = urlsplit(f"//{value.strip().lower()}")
        return parts.hostname or "", parts.port
    except ValueError:
        return "", None


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


@dataclass
class AccessPolicy:
    """The server's address and (when remote) its token."""

    host: str
    port: int
    token: str | None = None
    allowed_hosts: list[str] = field(default_factory=list)

    @property
    def remote(self) -> bool:
        return not is_loopback(self.host)

    def host_ok(self, header: str) -> bool:
        host, port = _split_host(header)
        if not host or (port or 80) != self.port:
            return False
        bound = self.host.strip("[]").lower()
        if is_loopback(host) or host == bound:
            return True
        if host in (h.lower() for h in self.allowed_hosts):
            return True
        return self.remote and _is_ip(host)

    def origin_ok(self, origin: str, host_header: str) -> bool:
        """Same origin as the page: ``http://`` plus the Host the request came to."""
        if origin == "null":
            return False
        try:
            parts = urlsplit(origin)
        except ValueError:
            return False
        if parts.scheme not in ("http", "https") or not parts.netloc:
            return False
        return parts.netloc.lower() == host_header.strip().lower() and self.host_ok(parts.netloc)

    def token_ok(self, value: str | None) -> bool:
        if self.token is None:
            return True
        if not value:
            return False
        return hmac.compare_digest(value.encode(), self.token.encode())


class SecurityMiddleware:
    """Refuses requests that fail the policy with a JSON error, before any route runs."""

    def __init__(self, app: ASGIApp, policy: AccessPolicy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {
            k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])
        }
        host = headers.get("host", "")
        if not self.policy.host_ok(host):
            await _deny(
                send,
                421 if host else 400,
                "This server does not answer to that Host name (a protection against "
                "DNS rebinding). Open it as http://127.0.0.1:<port>/ or add the name "
                "to [web] allowed_hosts.",
            )
            return
        origin = headers.get("origin")
        if origin is not None and not self.policy.origin_ok(origin, host):
            await _deny(
                send,
                403,
                "Cross-origin requests are refused: the Origin header does not match this server.",
            )
            return
        if headers.get("sec-fetch-site") == "cross-site":
            await _deny(send, 403, "Cross-site requests are refused.")
            return
        if self.policy.token is not None:
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            given = query.get("token", [None])[0]
            html = "text/html" in headers.get("accept", "")
            if scope.get("path") == "/" and given is not None:
                if self.policy.token_ok(given):
                    await _set_cookie_and_redirect(send, self.policy)
                else:
                    await _deny(send, 401, "Wrong access token. " + _LOGIN_HINT, html=html)
                return
            if not self.policy.token_ok(_request_token(headers, self.policy.port)):
                await _deny(send, 401, "An access token is required. " + _LOGIN_HINT, html=html)
                return
        await self.app(scope, receive, send)


_LOGIN_HINT = (
    "Log in by opening the address the server printed when it started (it ends in "
    "?token=...); API clients send 'Authorization: Bearer <token>'. The token is the "
    "OPENMANUS_WEB_TOKEN you set, or a new random one at every start."
)
_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>OpenManus: log in</title></head>
<body style="font-family: sans-serif; max-width: 40em; margin: 3em auto">
<h1>OpenManus web UI: log in</h1><p>{message}</p></body></html>
"""


_PAGE_CSP = b"default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'"


def _request_token(headers: dict[str, str], port: int) -> str | None:
    auth = headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    cookie = headers.get("cookie")
    if cookie:
        jar: SimpleCookie = SimpleCookie()
        try:
            jar.load(cookie)
        except Exception:
            return None
        name = cookie_name(port)
        if name in jar:
            return jar[name].value
    return None


async def _deny(send: Any, status: int, message: str, *, html: bool = False) -> None:
    """The refusal: JSON ``{"error", "status"}``, or a short page for a browser."""
    extra: list[tuple[bytes, bytes]] = []
    if html:
        body = _PAGE.format(message=escape(message)).encode()
        kind = b"text/html; charset=utf-8"
        extra.append((b"content-security-policy", _PAGE_CSP))
    else:
        body = json.dumps({"error": message, "status": status}).encode()
        kind = b"application/json"
    extra += [(b"content-type", kind), (b"content-length", str(len(body)).encode())]
    await _respond(send, status, [*extra, (b"cache-control", b"no-store")], body)


async def _set_cookie_and_redirect(send: Any, policy: AccessPolicy) -> None:
    """Trade ``/?token=`` for the cookie, and drop the token from the address bar."""
    cookie = f"{cookie_name(policy.port)}={policy.token}; Path=/; HttpOnly; SameSite=Strict"
    headers = [
        (b"location", b"/"),
        (b"set-cookie", cookie.encode()),
        (b"content-length", b"0"),
        (b"cache-control", b"no-store"),
        (b"referrer-policy", b"no-referrer"),
    ]
    await _respond(send, 303, headers, b"")


async def _respond(send: Any, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
