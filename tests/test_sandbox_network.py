"""Sandboxed code with ``network_enabled`` on bubblewrap: a network, but never the host's
loopback (DevTools, the web UI, the MCP server, a model server listen there).

Replays the attack the way model-written code would make it, through the python tool: scan
the host's 127.0.0.1 (and slirp's gateway, which would map to it) for a service the test
listens on, as root, on the real bwrap + slirp4netns.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.exceptions import SandboxUnavailableError
from app.sandbox.base import Sandbox
from app.tool.python_execute import PythonExecute
from tests.sandbox_utils import make_sandbox, requires_bwrap

pytestmark = [
    pytest.mark.e2e,
    requires_bwrap,
    pytest.mark.skipif(
        shutil.which("slirp4netns") is None,
        reason="slirp4netns is not installed (scripts/test.sh installs it)",
    ),
]

#: Probes a list of (host, port) pairs; prints JSON: what connected, the interfaces, routes.
PROBE = """
import json, socket
results = {}
for host, port in TARGETS:
    try:
        with socket.create_connection((host, port), timeout=3) as s:
            s.sendall(b"hello")
            results[f"{host}:{port}"] = "connected"
    except OSError as e:
        results[f"{host}:{port}"] = f"refused: {e}"
routes = [line.split()[:2] for line in open("/proc/net/route").read().splitlines()[1:]]
print(json.dumps({"results": results, "interfaces": [n for _, n in socket.if_nameindex()],
                  "routes": routes}))
"""


class Listener:
    """A TCP server standing in for DevTools / the web UI; counts who got through."""

    def __init__(self, host: str) -> None:
        self.sock = socket.create_server((host, 0))
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the accept() (close alone does not)
        self.sock.close()
        self._thread.join(5)


@pytest.fixture
def loopback() -> Iterator[Listener]:
    listener = Listener("127.0.0.1")
    yield listener
    listener.close()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


@contextlib.contextmanager
def own_test_host() -> Iterator[str]:
    """A host of the test's own: a network namespace joined to this one by a veth pair, with
    an address from the documentation range (never routed anywhere else). Yields its address;
    commands run inside with ``ip netns exec``."""
    tag = f"om{os.getpid() % 100000}"
    outer, inner = f"{tag}a", f"{tag}b"
    base = 4 * (os.getpid() % 63)  # a /30 of TEST-NET-2 of its own, per test process
    here, there = f"198.51.100.{base + 1}", f"198.51.100.{base + 2}"
    steps = [
        ["ip", "netns", "add", tag],
        ["ip", "link", "add", outer, "type", "veth", "peer", "name", inner],
        ["ip", "link", "set", inner, "netns", tag],
        ["ip", "addr", "add", f"{here}/30", "dev", outer],
        ["ip", "link", "set", outer, "up"],
        ["ip", "netns", "exec", tag, "ip", "addr", "add", f"{there}/30", "dev", inner],
        ["ip", "netns", "exec", tag, "ip", "link", "set", inner, "up"],
        ["ip", "netns", "exec", tag, "ip", "link", "set", "lo", "up"],
    ]
    try:
        for step in steps:
            subprocess.run(step, check=True, capture_output=True, timeout=30)
        yield there
    finally:
        subprocess.run(["ip", "link", "del", outer], capture_output=True, timeout=30)
        subprocess.run(["ip", "netns", "del", tag], capture_output=True, timeout=30)


async def _probe(box: Sandbox, targets: list[tuple[str, int]]) -> dict[str, object]:
    tool = PythonExecute(sandbox=box)
    try:
        out = await tool.execute(code=f"TARGETS = {targets!r}\n{PROBE}")
    finally:
        await box.cleanup()
    text = str(out["observation"] if isinstance(out, dict) else out)
    line = next((x for x in text.splitlines() if x.startswith("{")), None)
    assert line is not None, text
    return dict(json.loads(line))


async def test_network_enabled_bubblewrap_cannot_reach_host_loopback(
    workspace: Path, loopback: Listener
) -> None:
    box = make_sandbox("bubblewrap", workspace, network_enabled=True)
    seen = await _probe(box, [("127.0.0.1", loopback.port), ("10.0.2.2", loopback.port)])
    results = seen["results"]
    assert isinstance(results, dict)
    assert all(v != "connected" for v in results.values()), results
    assert loopback.accepted == 0
    # User-mode networking is up: an interface besides lo and a default route through it.
    assert "tap0" in seen["interfaces"], seen
    assert ["tap0", "00000000"] in seen["routes"], seen


async def test_the_same_probe_reaches_the_host_without_the_namespace(
    workspace: Path, loopback: Listener
) -> None:
    """The control: on the local backend (no isolation) the probe does get through, so the
    test above can fail."""
    box = make_sandbox("local", workspace)
    seen = await _probe(box, [("127.0.0.1", loopback.port)])
    assert seen["results"] == {f"127.0.0.1:{loopback.port}": "connected"}
    assert loopback.accepted == 1


async def test_network_enabled_bubblewrap_reaches_other_hosts(workspace: Path) -> None:
    """Outbound traffic works: a server on another host (the test's own, in a network
    namespace) answers through slirp4netns, while 127.0.0.1 of this host does not."""
    with own_test_host() as address:
        code = (
            "import socket, sys\n"
            "s = socket.create_server((sys.argv[1], 0)); print(s.getsockname()[1], flush=True)\n"
            "c, _ = s.accept(); c.sendall(b'hello from the test host'); c.close()\n"
        )
        tag = f"om{os.getpid() % 100000}"
        server = await asyncio.create_subprocess_exec(
            "ip", "netns", "exec", tag, sys.executable, "-c", code, address,
            stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        try:
            assert server.stdout is not None
            port = int(await asyncio.wait_for(server.stdout.readline(), 30))
            box = make_sandbox("bubblewrap", workspace, network_enabled=True)
            seen = await _probe(box, [(address, port), ("127.0.0.1", port)])
            # It accepted the sandbox's connection, then exited.
            assert await asyncio.wait_for(server.wait(), 30) == 0
        finally:
            if server.returncode is None:
                server.kill()
                await server.wait()
    results = seen["results"]
    assert isinstance(results, dict)
    assert results[f"{address}:{port}"] == "connected", results
    assert str(results[f"127.0.0.1:{port}"]).startswith("refused"), results


async def test_network_disabled_has_only_its_own_loopback(
    workspace: Path, loopback: Listener
) -> None:
    box = make_sandbox("bubblewrap", workspace, network_enabled=False)
    seen = await _probe(box, [("127.0.0.1", loopback.port)])
    assert seen["interfaces"] == ["lo"], seen
    assert seen["routes"] == []
    assert loopback.accepted == 0


async def test_without_slirp4netns_network_enabled_is_refused(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Never silently the host's network: a clear error naming the missing program."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    bwrap = shutil.which("bwrap")
    assert bwrap is not None
    (bin_dir / "bwrap").symlink_to(bwrap)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin/nonexistent")
    box = make_sandbox("bubblewrap", workspace, network_enabled=True)
    with pytest.raises(SandboxUnavailableError, match="slirp4netns"):
        await box.start()
    await box.cleanup()
