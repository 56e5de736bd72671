"""Refuse network access beyond the loopback interface, so tests can never reach the internet.

``install()`` patches ``socket.socket.connect`` / ``connect_ex`` / ``sendto`` and the name
lookups of ``socket``, which everything (asyncio, httpx, ``openai``) goes through: a stray
request fails at once, saying why. Loopback, wildcard and non-IP sockets stay allowed. The patch
state lives on ``socket``, so a copy loaded by ``sitecustomize`` and this module agree on it.

Subprocesses: put :data:`SITE_DIR` on ``PYTHONPATH`` and set ``OPENMANUS_BLOCK_NETWORK=1``.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

#: Directory holding a ``sitecustomize.py`` that installs the guard in child interpreters.
SITE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_site")
#: Set to ``1`` (with :data:`SITE_DIR` on ``PYTHONPATH``) to guard a child interpreter.
ENV_VAR = "OPENMANUS_BLOCK_NETWORK"

_STATE_ATTR = "_openmanus_netguard_originals"
_SOCKET_METHODS = ("connect", "connect_ex", "sendto")
_MODULE_FUNCS = ("getaddrinfo", "gethostbyname", "gethostbyname_ex")
_LOCAL_NAMES = {"localhost", "localhost."}
_IP_FAMILIES = {socket.AF_INET, socket.AF_INET6}


_ERROR_ATTR = "_openmanus_netguard_error"


class _NetworkBlockedError(PermissionError):
    """A connection to a non-loopback address was attempted while the guard is installed."""


# One class per interpreter even when sitecustomize loaded a second copy of this file, so that
# ``except netguard.NetworkBlockedError`` catches what either copy raises.
NetworkBlockedError: type[PermissionError] = getattr(socket, _ERROR_ATTR, None) or (
    _NetworkBlockedError
)
NetworkBlockedError.__name__ = NetworkBlockedError.__qualname__ = "NetworkBlockedError"
NetworkBlockedError.__module__ = "app.testing.netguard"
setattr(socket, _ERROR_ATTR, NetworkBlockedError)


def _message(host: object) -> str:
    if isinstance(host, bytes | bytearray):
        host = bytes(host).decode("ascii", "replace")
    return f"network access outside 127.0.0.1 is blocked in tests: {host}"


def is_allowed_host(host: object) -> bool:
    """Whether the guard lets ``host`` through: loopback, wildcard, ``localhost`` or none."""
    if host is None:
        return True
    if isinstance(host, bytes | bytearray):
        try:
            host = bytes(host).decode("ascii")
        except UnicodeDecodeError:
            return False
    if not isinstance(host, str):
        return False
    name = host.strip().lower()
    if name in ("", "<broadcast>"):
        return name == ""
    if name in _LOCAL_NAMES:
        return True
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    try:
        address = ipaddress.ip_address(name.split("%", 1)[0])
    except ValueError:
        return False  # any other name would need a real lookup
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback or address.is_unspecified


def _check_address(sock: socket.socket, address: Any) -> None:
    if sock.family not in _IP_FAMILIES:
        return
    host = address[0] if isinstance(address, tuple) and address else address
    if not is_allowed_host(host):
        raise NetworkBlockedError(13, _message(host))


def _check_lookup(host: object) -> None:
    if not is_allowed_host(host):
        raise socket.gaierror(socket.EAI_NONAME, _message(host))


def is_installed() -> bool:
    """Whether the guard is active in this interpreter."""
    return getattr(socket, _STATE_ATTR, None) is not None


def install() -> None:
    """Activate the guard (a second call does nothing)."""
    if is_installed():
        return
    originals: dict[str, Any] = {}
    for name in _SOCKET_METHODS:
        # Remember whether the method was defined on socket.socket itself or inherited.
        originals[f"socket.{name}"] = socket.socket.__dict__.get(name)
    for name in _MODULE_FUNCS:
        originals[name] = getattr(socket, name)

    # Methods replaced on the class on purpose (uninstall() puts the originals back).
    guards = {"connect": _guard_connect, "connect_ex": _guard_connect, "sendto": _guard_sendto}
    for name, guard in guards.items():
        setattr(socket.socket, name, guard(getattr(socket.socket, name)))
    for name in _MODULE_FUNCS:
        setattr(socket, name, _guard_lookup(getattr(socket, name)))
    setattr(socket, _STATE_ATTR, originals)


def _guard_connect(real: Callable[..., Any]) -> Callable[..., Any]:
    def connect(self: socket.socket, address: Any) -> Any:
        _check_address(self, address)
        return real(self, address)

    return connect


def _guard_sendto(real: Callable[..., Any]) -> Callable[..., Any]:
    def sendto(self: socket.socket, data: Any, *args: Any) -> Any:
        if args:
            _check_address(self, args[-1])
        return real(self, data, *args)

    return sendto


def _guard_lookup(real: Callable[..., Any]) -> Callable[..., Any]:
    def lookup(host: Any, *args: Any, **kwargs: Any) -> Any:
        _check_lookup(host)
        return real(host, *args, **kwargs)

    return lookup


def uninstall() -> None:
    """Restore the original functions (does nothing if the guard is not installed)."""
    originals = getattr(socket, _STATE_ATTR, None)
    if originals is None:
        return
    for name in _SOCKET_METHODS:
        original = originals[f"socket.{name}"]
        if original is None:
            if name in socket.socket.__dict__:
                delattr(socket.socket, name)
        else:
            setattr(socket.socket, name, original)
    for name in _MODULE_FUNCS:
        setattr(socket, name, originals[name])
    delattr(socket, _STATE_ATTR)


@contextmanager
def installed() -> Iterator[None]:
    """Guard a block, leaving the previous state (guarded or not) in place afterwards."""
    was_installed = is_installed()
    install()
    try:
        yield
    finally:
        if not was_installed:
            uninstall()
