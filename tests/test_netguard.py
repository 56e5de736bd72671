"""The network guard: loopback stays usable, everything else fails at once and says why."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from app.testing import ScriptedLLMServer, netguard, text

BLOCKED_IP = "203.0.113.1"  # TEST-NET-3: never routable
MESSAGE = "network access outside 127.0.0.1 is blocked in tests"


@pytest.fixture
def guard() -> Iterator[None]:
    with netguard.installed():
        yield


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    try:
        yield sock
    finally:
        sock.close()


def test_connect_to_a_public_address_fails_at_once(guard) -> None:
    started = time.monotonic()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        with pytest.raises(netguard.NetworkBlockedError, match=f"{MESSAGE}: {BLOCKED_IP}"):
            sock.connect((BLOCKED_IP, 80))
        with pytest.raises(OSError, match=MESSAGE):
            sock.connect_ex((BLOCKED_IP, 80))
    with pytest.raises(OSError, match=MESSAGE):
        socket.create_connection((BLOCKED_IP, 80), timeout=5)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        with pytest.raises(OSError, match=MESSAGE):
            udp.sendto(b"x", ("8.8.8.8", 53))
    assert time.monotonic() - started < 1


def test_name_lookup_fails_at_once(guard) -> None:
    started = time.monotonic()
    with pytest.raises(socket.gaierror, match=f"{MESSAGE}: example.com"):
        socket.getaddrinfo("example.com", 443)
    with pytest.raises(socket.gaierror, match=MESSAGE):
        socket.getaddrinfo(b"example.com", 443)
    with pytest.raises(socket.gaierror, match=MESSAGE):
        socket.gethostbyname("example.com")
    with pytest.raises(socket.gaierror, match=MESSAGE):
        socket.create_connection(("example.com", 80), timeout=5)
    assert time.monotonic() - started < 1


def test_loopback_and_unix_sockets_still_work(guard, listener, tmp_path: Path) -> None:
    port = listener.getsockname()[1]
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        pass
    with socket.create_connection(("localhost", port), timeout=5):
        pass
    assert socket.getaddrinfo("127.0.0.1", port)
    assert socket.getaddrinfo(None, port)  # passive lookups for binding
    a, b = socket.socketpair()
    a.sendall(b"ping")
    assert b.recv(4) == b"ping"
    a.close()
    b.close()
    path = str(tmp_path / "s.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(path)
        server.listen()
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.connect(path)


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("::ffff:127.0.0.1", True),
        ("localhost", True),
        ("LOCALHOST", True),
        (b"localhost", True),
        ("0.0.0.0", True),
        ("", True),
        (None, True),
        (BLOCKED_IP, False),
        ("10.0.0.1", False),
        ("2001:db8::1", False),
        ("::ffff:8.8.8.8", False),
        ("example.com", False),
        ("localhost.example.com", False),
        ("<broadcast>", False),
        (b"\xff", False),
    ],
)
def test_allowed_hosts(host, allowed) -> None:
    assert netguard.is_allowed_host(host) is allowed


async def test_asyncio_connections_are_guarded(guard, listener) -> None:
    with pytest.raises(OSError, match=MESSAGE):
        await asyncio.wait_for(asyncio.open_connection(BLOCKED_IP, 80), 5)
    with pytest.raises(socket.gaierror, match=MESSAGE):
        await asyncio.wait_for(asyncio.open_connection("example.com", 80), 5)
    _, writer = await asyncio.open_connection("127.0.0.1", listener.getsockname()[1])
    writer.close()
    await writer.wait_closed()


async def test_openai_client_works_locally_and_is_blocked_elsewhere(guard) -> None:
    async with ScriptedLLMServer([text("local ok")]) as server:
        for base_url in (server.base_url, f"http://localhost:{server.port}/v1"):
            api = openai.AsyncOpenAI(base_url=base_url, api_key="t", max_retries=0)
            try:
                if base_url == server.base_url:
                    result = await api.chat.completions.create(
                        model="m", messages=[{"role": "user", "content": "x"}]
                    )
                    assert result.choices[0].message.content == "local ok"
                else:
                    assert [m.id for m in (await api.models.list()).data]
            finally:
                await api.close()
    for base_url in ("http://example.com/v1", f"http://{BLOCKED_IP}/v1"):
        api = openai.AsyncOpenAI(base_url=base_url, api_key="t", max_retries=0, timeout=5)
        started = time.monotonic()
        try:
            with pytest.raises(openai.APIConnectionError) as caught:
                await api.models.list()
        finally:
            await api.close()
        assert time.monotonic() - started < 2
        assert MESSAGE in _cause_chain(caught.value)


def _cause_chain(exc: BaseException) -> str:
    parts = []
    seen: set[int] = set()
    stack: list[BaseException] = [exc]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        parts.append(str(current))
        stack.extend(e for e in (current.__cause__, current.__context__) if e is not None)
        stack.extend(getattr(current, "exceptions", ()))
    return "\n".join(parts)


def test_install_is_idempotent_and_uninstall_restores() -> None:
    was_installed = netguard.is_installed()
    netguard.uninstall()
    try:
        originals = (socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo)
        assert "connect" not in socket.socket.__dict__
        netguard.install()
        patched = (socket.socket.connect, socket.getaddrinfo)
        netguard.install()
        assert (socket.socket.connect, socket.getaddrinfo) == patched
        assert netguard.is_installed()
        netguard.uninstall()
        netguard.uninstall()
        assert not netguard.is_installed()
        assert (socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo) == originals
        assert "connect" not in socket.socket.__dict__
        with netguard.installed():
            with netguard.installed():
                assert netguard.is_installed()
            assert netguard.is_installed()  # the inner block leaves the outer guard alone
        assert not netguard.is_installed()
    finally:
        if was_installed:
            netguard.install()


CHILD = """
import json, socket, sys
port = int(sys.argv[1])
out = {"installed": hasattr(socket, "_openmanus_netguard_originals")}
actions = [("local", lambda: socket.create_connection(("127.0.0.1", port), timeout=3).close())]
if out["installed"]:  # an unguarded child must not try the outside world for real
    actions += [
        ("remote", lambda: socket.create_connection(("203.0.113.1", 80), timeout=3).close()),
        ("lookup", lambda: socket.getaddrinfo("example.com", 80)),
    ]
for label, action in actions:
    try:
        action()
        out[label] = "ok"
    except OSError as exc:
        out[label] = str(exc)
if out["installed"]:
    from app.testing import netguard  # the imported module sees the sitecustomize guard
    out["module_sees_it"] = netguard.is_installed()
print(json.dumps(out))
"""


def _run_child(port: int, env_value: str | None) -> dict[str, object]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (netguard.SITE_DIR, env.get("PYTHONPATH")) if p)
    env.pop(netguard.ENV_VAR, None)
    if env_value is not None:
        env[netguard.ENV_VAR] = env_value
    completed = subprocess.run(
        [sys.executable, "-c", CHILD, str(port)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(completed.stdout)


@pytest.mark.e2e
def test_subprocess_with_sitecustomize_is_blocked(listener) -> None:
    port = listener.getsockname()[1]
    guarded = _run_child(port, "1")
    assert guarded["installed"] is True
    assert guarded["module_sees_it"] is True
    assert f"{MESSAGE}: 203.0.113.1" in guarded["remote"]
    assert f"{MESSAGE}: example.com" in guarded["lookup"]
    assert guarded["local"] == "ok"
    unguarded = _run_child(port, None)
    assert unguarded["installed"] is False
    assert unguarded["local"] == "ok"


def test_site_dir_holds_sitecustomize() -> None:
    assert os.path.isfile(os.path.join(netguard.SITE_DIR, "sitecustomize.py"))
