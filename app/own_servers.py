"""The addresses this program's own servers (web UI, MCP) listen on, so the agent's browser
can refuse them in any spelling (``127.1``, ``0x7f000001``, ``LOCALHOST.``, a name)."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import itertools
import re
import socket
import threading
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

#: Names Chromium itself treats as loopback without asking DNS (``net::IsLocalHostname``).
_LOOPBACK_NAMES = frozenset(
    {"localhost", "localhost.localdomain", "localhost6", "localhost6.localdomain6"}
)
_DOTS = str.maketrans({"\u3002": ".", "\uff0e": ".", "\uff61": "."})
_HEX = re.compile(r"^[0-9a-f]*$")
_OCT = re.compile(r"^[0-7]*$")
_DEC = re.compile(r"^[0-9]+$")
_RESOLVE_TIMEOUT = 5.0


@dataclass(frozen=True)
class OwnServer:
    """One listening server of this process: what it is, and the address it is bound to."""

    label: str  # "web UI", "MCP server"
    host: str  # the bound address, an IP literal (``0.0.0.0`` for every interface)
    port: int

    def reaches(self, address: IPAddress, port: int) -> bool:
        """Whether a connection to ``address:port`` could land on this server."""
        if port != self.port:
            return False
        address = _unmapped(address)
        if address.is_loopback or address.is_unspecified:
            return True
        bound = parse_ip(self.host)
        if bound is None:
            return True  # an unparsable bound address: refuse rather than guess
        bound = _unmapped(bound)
        if address == bound:
            return True
        return bound.is_unspecified and _is_local_address(address)


_lock = threading.Lock()
_servers: dict[int, OwnServer] = {}
_listeners: list[Callable[[], None]] = []
_handles = itertools.count(1)


def register(label: str, host: str, port: int) -> int:
    """Record a listening server; returns the handle ``unregister`` takes."""
    with _lock:
        handle = next(_handles)
        _servers[handle] = OwnServer(label, host.strip("[]"), int(port))
        listeners = list(_listeners)
    _notify(listeners)
    return handle


def unregister(handle: int) -> None:
    """Forget a server (it stopped listening). Unknown handles are ignored."""
    with _lock:
        removed = _servers.pop(handle, None) is not None
        listeners = list(_listeners)
    if removed:
        _notify(listeners)


@contextlib.contextmanager
def listening(label: str, sock: socket.socket) -> Iterator[OwnServer]:
    """Registered while the block runs: the bound address of ``sock``."""
    host, port = sock.getsockname()[:2]
    handle = register(label, str(host), int(port))
    try:
        yield OwnServer(label, str(host), int(port))
    finally:
        unregister(handle)


def servers() -> tuple[OwnServer, ...]:
    with _lock:
        return tuple(_servers.values())


def ports() -> frozenset[int]:
    """The ports of the registered servers (what the browser's request guard watches)."""
    with _lock:
        return frozenset(s.port for s in _servers.values())


def subscribe(callback: Callable[[], None]) -> Callable[[], None]:
    """Call ``callback`` (from the registering thread) whenever the set changes; returns the
    function that unsubscribes."""
    with _lock:
        _listeners.append(callback)

    def cancel() -> None:
        with _lock, contextlib.suppress(ValueError):
            _listeners.remove(callback)

    return cancel


def _notify(listeners: list[Callable[[], None]]) -> None:
    for callback in listeners:
        with contextlib.suppress(Exception):  # a listener's failure is its own business
            callback()


# ---- host spellings ------------------------------------------------------------------------------


def canonical_host(host: str) -> str:
    """The host as a browser compares it: full-width forms folded (NFKC), ideographic dots
    made dots, lower case, brackets and trailing dots removed."""
    host = unicodedata.normalize("NFKC", host).translate(_DOTS).strip().lower()
    if host.startswith("[") and host.endswith("]"):
        return host[1:-1]
    return host.rstrip(".") if host.strip(".") else host


def is_loopback_name(host: str) -> bool:
    """``localhost`` and the names Chromium resolves to loopback itself (``*.localhost``)."""
    name = canonical_host(host)
    return name in _LOOPBACK_NAMES or name.endswith(".localhost")


def _ipv4_number(part: str) -> int | None:
    text, base, pattern = part, 10, _DEC
    if len(text) >= 2 and text[:2] == "0x":
        text, base, pattern = text[2:], 16, _HEX
    elif len(text) >= 2 and text[0] == "0":
        text, base, pattern = text[1:], 8, _OCT
    if not pattern.match(text):
        return None
    return int(text, base) if text else 0


def _ipv4(host: str) -> ipaddress.IPv4Address | None:
    """The WHATWG IPv4 parser: 1 to 4 parts, each decimal, octal (``0177``) or hex (``0x7f``),
    the last one filling the remaining bytes (``127.1``, ``2130706433``)."""
    parts = host.split(".")
    if len(parts) > 1 and parts[-1] == "":
        parts.pop()
    if not parts or len(parts) > 4 or "" in parts:
        return None
    numbers = [_ipv4_number(p) for p in parts]
    if any(n is None for n in numbers):
        return None
    values = [n for n in numbers if n is not None]
    if any(n > 255 for n in values[:-1]) or values[-1] >= 256 ** (5 - len(values)):
        return None
    address = values[-1]
    for i, n in enumerate(values[:-1]):
        address += n * 256 ** (3 - i)
    return ipaddress.IPv4Address(address)


def parse_ip(host: str) -> IPAddress | None:
    """The IP address ``host`` spells, the way a browser reads it, or None for a name."""
    name = canonical_host(host)
    if ":" in name:
        try:
            return ipaddress.IPv6Address(name)
        except ValueError:
            return None
    return _ipv4(name)


def _unmapped(address: IPAddress) -> IPAddress:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _is_local_address(address: IPAddress) -> bool:
    """Whether ``address`` is one of this machine's (binding to it works only then)."""
    family = socket.AF_INET if address.version == 4 else socket.AF_INET6
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.bind((str(address), 0))
    except OSError:
        return False
    return True


def match(host: str, port: int) -> OwnServer | None:
    """The registered server that ``host:port`` reaches, without asking DNS: IP literals in
    any spelling and the loopback names. A name that needs DNS gives None."""
    registered = servers()
    if not any(s.port == port for s in registered):
        return None
    address = parse_ip(host)
    if address is None and is_loopback_name(host):
        address = ipaddress.IPv4Address("127.0.0.1")
    if address is None:
        return None
    return next((s for s in registered if s.reaches(address, port)), None)


async def resolve_match(host: str, port: int) -> OwnServer | None:
    """``match``, and for other names on a registered port, what DNS says. A name that does
    not resolve there counts as ours: we cannot tell where the browser would go."""
    found = match(host, port)
    if found is not None:
        return found
    registered = [s for s in servers() if s.port == port]
    if not registered or parse_ip(host) is not None:
        return None
    name = canonical_host(host)
    try:
        infos = await asyncio.wait_for(
            asyncio.get_running_loop().getaddrinfo(name, port, type=socket.SOCK_STREAM),
            _RESOLVE_TIMEOUT,
        )
    except (OSError, TimeoutError, UnicodeError, ValueError):
        return registered[0]
    for info in infos:
        address = parse_ip(str(info[4][0]).split("%", 1)[0])
        if address is None:
            continue
        for server in registered:
            if server.reaches(address, port):
                return server
    return None
