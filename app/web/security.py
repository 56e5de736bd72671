"""Who may talk to the web UI: Host and Origin checks, and the access token.

* **Host** must name this server: a loopback form (``localhost``, ``127.0.0.1``, ``[::1]``)
  or the bound address with the bound port, or a name listed in ``[web] allowed_hosts``.
  A DNS-rebinding page reaches us under *its* domain name, so it is refused here. When the
  server listens remotely, any IP literal is accepted too (rebinding needs a name).
* **Origin**, when a browser sends one, must be this server's own: a page elsewhere can
  neither post tasks nor read the event stream.
* **Token** (remote use): every request must carry it, as ``Authorization: Bearer``, or the
  ``openmanus_token`` cookie that the first page load sets from ``/?token=...`` (then
  redirecting to ``/``, so the token leaves the address bar). EventSource cannot send headers,
  so the cookie carries it for the stream. The access log is off: no URL is ever logged.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs, urlsplit

__all__ = ["COOKIE", "AccessPolicy", "SecurityMiddleware", "is_loopback"]

COOKIE = "openmanus_token"
Scope = MutableMapping[str, Any]
ASGIApp = Callable[
    [Scope, Callable[..., Awaitable[Any]], Callable[..., Awaitable[Any]]], Awaitable[None]
]


def is_loopback(host: str) -> bool:
    if host in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _split_host(value: str) -> tuple[str, int | None]:
    """``host[:port]`` (IPv6 in brackets) -> (lower-case host without brackets, port)."""
    value = value.strip().lower()
    try:
        parts = urlsplit(f"//{value}")
        port = parts.port
        host = parts.hostname or ""
    except ValueError:
        return "", None
    return host, port


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
            if scope.get("path") == "/" and given is not None:
                if self.policy.token_ok(given):
                    await _set_cookie_and_redirect(send, self.policy.token)
                else:
                    await _deny(send, 401, "Wrong access token.")
                return
            if not self.policy.token_ok(_request_token(headers)):
                await _deny(
                    send,
                    401,
                    "An access token is required: open the address the "
                    "server printed at start (it ends in ?token=...), or send "
                    "'Authorization: Bearer <token>'.",
                )
                return
        await self.app(scope, receive, send)


def _request_token(headers: dict[str, str]) -> str | None:
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
        if COOKIE in jar:
            return jar[COOKIE].value
    return None


async def _deny(send: Any, status: int, message: str) -> None:
    body = json.dumps({"error": message, "status": status}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"cache-control", b"no-store"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _set_cookie_and_redirect(send: Any, token: str) -> None:
    cookie = f"{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict"
    await send(
        {
            "type": "http.response.start",
            "status": 303,
            "headers": [
                (b"location", b"/"),
                (b"set-cookie", cookie.encode()),
                (b"content-length", b"0"),
                (b"cache-control", b"no-store"),
                (b"referrer-policy", b"no-referrer"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": b""})
