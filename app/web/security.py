"""Who may talk to the web UI: Host and Origin checks, and the access token (docs/web-ui.md);
``app.web.server.SecurityMiddleware`` applies them before any route runs.

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
from dataclasses import dataclass, field
from urllib.parse import urlsplit

#: The cookie's name, followed by ``_<port>``.
COOKIE = "openmanus_token"


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
