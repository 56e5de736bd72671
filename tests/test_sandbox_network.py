"""Sandboxed code with ``network_enabled`` on bubblewrap: a network, but never the host's
loopback (DevTools, the web UI, the MCP server, a model server listen there), and on bubblewrap
and docker never the cloud's instance metadata service (169.254.169.254 hands out the
machine's IAM role credentials to anyone who asks).

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
from app.sandbox.netblock import SINK_GATEWAY
from app.tool.python_execute import PythonExecute
from tests.sandbox_utils import make_sandbox, requires_bwrap, requires_docker

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


def inside_test_host() -> list[str]:
    """The command prefix that runs a command in :func:`own_test_host`'s namespace."""
    return ["nsenter", f"--net=/run/netns/om{os.getpid() % 100000}"]


@contextlib.contextmanager
def own_test_host() -> Iterator[str]:
    """A host of the test's own: a network namespace joined to this one by a veth pair, with
    an address from the documentation range (never routed anywhere else). Yields its address;
    commands run inside with :func:`inside_test_host` (``nsenter --net``: it only joins the
    network namespace, where ``ip netns exec`` also remounts ``/sys``, which failed once
    beside the other tests' mounts)."""
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
        [*inside_test_host(), "ip", "addr", "add", f"{there}/30", "dev", inner],
        [*inside_test_host(), "ip", "link", "set", inner, "up"],
        [*inside_test_host(), "ip", "link", "set", "lo", "up"],
    ]
    try:
        for step in steps:
            done = subprocess.run(step, capture_output=True, timeout=30)
            assert done.returncode == 0, (step, done.returncode, done.stderr.decode())
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
        server = await asyncio.create_subprocess_exec(
            *inside_test_host(), sys.executable, "-c", code, address,
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


# ---- the instance metadata service ---------------------------------------------------------------

#: Connects to each (host, port) of TARGETS, plain, as an IPv4-mapped IPv6 address and bound to
#: the interface (SO_BINDTODEVICE); prints JSON {target: [errno name or "connected", seconds]}.
METADATA_PROBE = """
import errno, json, socket, time
results = {}
def attempt(label, family, address, device=None):
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.settimeout(5)
    started = time.monotonic()
    try:
        if device:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, device.encode())
        sock.connect(address)
        outcome = "connected"
    except OSError as exc:
        outcome = errno.errorcode.get(exc.errno, str(exc))
    finally:
        sock.close()
    results[label] = [outcome, round(time.monotonic() - started, 3)]
device = next(n for _, n in socket.if_nameindex() if n != "lo")
for host, port in TARGETS:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    attempt(f"{host}:{port}", family, (host, port))
    if family == socket.AF_INET:
        attempt(f"[::ffff:{host}]:{port}", socket.AF_INET6, (f"::ffff:{host}", port))
        attempt(f"{host}:{port}@{device}", family, (host, port), device)
print(json.dumps(results))
"""

#: Runs in a network namespace of its own (the test's, so the host's routes are never
#: touched): puts 169.254.169.254 and a control address on its loopback with a listener on
#: each (a stand-in metadata service), checks it reaches them itself (as slirp4netns, which
#: connects from here, would), then probes both from a bubblewrap sandbox with a network.
_IN_OWN_NAMESPACE = """
import asyncio, json, socket, subprocess, sys, tempfile, threading
for address in ("169.254.169.254/32", "10.77.0.1/32"):
    subprocess.run(["ip", "addr", "add", address, "dev", "lo"], check=True)
subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
accepted = {}
first_accept = threading.Event()
def serve(host):
    server = socket.create_server((host, 80))
    accepted[host] = 0
    def loop():
        while True:
            conn, _ = server.accept()
            accepted[host] += 1
            first_accept.set()
            conn.close()
    threading.Thread(target=loop, daemon=True).start()
for host in ("169.254.169.254", "10.77.0.1"):
    serve(host)
socket.create_connection(("169.254.169.254", 80), timeout=5).close()  # reachable from here
# connect() returns at the handshake, before the listener's thread has taken the connection.
first_accept.wait(30)
reached_here = accepted["169.254.169.254"]
from app.config import SandboxSettings
from app.sandbox.factory import create_sandbox
async def main():
    box = create_sandbox(SandboxSettings(backend="bubblewrap", network_enabled=True,
                                         memory_limit="256m"), sys.argv[1])
    try:
        return await box.run_python(sys.argv[2])
    finally:
        await box.cleanup()
result = asyncio.run(main())
print(json.dumps({"reached_here": reached_here, "accepted": accepted,
                  "stdout": result.stdout, "stderr": result.stderr}))
"""


def _metadata_verdict(results: dict[str, list]) -> None:
    """Both spellings of a metadata address fail with EACCES (the prohibit route: no timeout,
    which would read "timed out", and no time limit, which a loaded machine can miss). A
    socket bound to the interface skips the routes (the kernel then assumes the address is on
    the link and asks for it by ARP): nothing on slirp4netns's link answers, and on docker such
    sockets go to the sink instead, so no connection either (the host-held address test below
    has a bridge that does answer)."""
    blocked = {k: v for k, v in results.items() if k.startswith(("169.254.", "[::ffff:169.254."))}
    assert len(blocked) == 6, results  # two addresses, three ways each
    for target, (outcome, _seconds) in blocked.items():
        if "@" in target:
            assert outcome != "connected", (target, results)
        else:
            assert outcome == "EACCES", (target, results)


@pytest.mark.skipif(shutil.which("unshare") is None or shutil.which("ip") is None,
                    reason="needs util-linux's unshare and iproute2's ip")  # fmt: skip
async def test_bubblewrap_with_a_network_cannot_reach_the_instance_metadata_service(
    workspace: Path,
) -> None:
    targets = [("169.254.169.254", 80), ("169.254.170.2", 80), ("10.77.0.1", 80)]
    probe = f"TARGETS = {targets!r}\n{METADATA_PROBE}"
    unshare = ["unshare", "--net"] if os.geteuid() == 0 else ["unshare", "-r", "--net"]
    driver = await asyncio.create_subprocess_exec(
        *unshare, sys.executable, "-I", "-c", _IN_OWN_NAMESPACE, str(workspace), probe,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd="/",
    )  # fmt: skip
    out, err = await asyncio.wait_for(driver.communicate(), 120)
    assert driver.returncode == 0, err.decode()
    seen = json.loads(out.decode().splitlines()[-1])
    assert seen["reached_here"] == 1, seen  # the stand-in service answers outside the sandbox
    results = json.loads(seen["stdout"].splitlines()[-1])
    _metadata_verdict(results)
    assert results["10.77.0.1:80"][0] == "connected", results  # another address still works
    assert seen["accepted"]["169.254.169.254"] == 1  # only the driver's own connection, even
    # from a socket bound to the interface
    assert seen["accepted"]["10.77.0.1"] >= 1


@requires_docker
async def test_docker_with_a_network_cannot_reach_the_instance_metadata_service(
    workspace: Path,
) -> None:
    box = make_sandbox("docker", workspace, network_enabled=True)
    try:
        await box.start()
        box.container.reload()
        gateway = box.container.attrs["NetworkSettings"]["Gateway"]  # the host, on the bridge
        listener = Listener(gateway)
        try:
            targets = [("169.254.169.254", 80), ("169.254.170.2", 80), (gateway, listener.port)]
            result = await box.run_python(f"TARGETS = {targets!r}\n{METADATA_PROBE}")
            six = await box.run_python(METADATA_PROBE_V6)
        finally:
            listener.close()
    finally:
        await box.cleanup()
    assert result.exit_code == 0, result.stderr
    results = json.loads(result.stdout.splitlines()[-1])
    _metadata_verdict(results)
    assert results[f"{gateway}:{listener.port}"][0] == "connected", results
    assert listener.accepted >= 1
    outcome = json.loads(six.stdout.splitlines()[-1])
    assert outcome[0] not in ("connected", "timed out"), outcome


#: EKS Pod Identity's agent address: the host itself holds it, so the host answers ARP for it.
HOST_HELD_METADATA = "169.254.170.23"

#: Connects to TARGET bound to the interface (SO_BINDTODEVICE) and with IP_UNICAST_IF, then
#: prints JSON {"outcomes": [...], "neighbours": the 169.254 addresses in the ARP table}.
BOUND_PROBE = """
import errno, json, socket, struct
outcomes = []
device = next(n for _, n in socket.if_nameindex() if n != "lo")
index = socket.if_nametoindex(device)
for option in ("bindtodevice", "unicast_if"):
    sock = socket.socket()
    sock.settimeout(4)
    try:
        if option == "bindtodevice":
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, device.encode())
        else:
            sock.setsockopt(socket.IPPROTO_IP, 50, struct.pack("!I", index))  # IP_UNICAST_IF
        sock.connect(TARGET)
        outcomes.append("connected")
    except OSError as exc:
        outcomes.append(errno.errorcode.get(exc.errno, str(exc)) if exc.errno else str(exc))
    finally:
        sock.close()
with open("/proc/net/arp") as table:
    neighbours = [line.split()[0] for line in table.readlines()[1:]]
linked = [n for n in neighbours if n.startswith("169.254.")]
print(json.dumps({"outcomes": outcomes, "neighbours": linked}))
"""


@pytest.fixture
def host_held_metadata() -> Iterator[str]:
    """:data:`HOST_HELD_METADATA` on the host's loopback while the test runs."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("puts an address on the host's loopback: needs root and iproute2")
    # The host answers ARP on the bridge for any address it holds (the kernel's default):
    # without the sink, a bound socket connects (seen on the previous code).
    for interface in ("all", "docker0"):
        answers = Path(f"/proc/sys/net/ipv4/conf/{interface}/arp_ignore").read_text().strip()
        assert answers == "0", (interface, answers)
    address = f"{HOST_HELD_METADATA}/32"
    subprocess.run(["ip", "addr", "add", address, "dev", "lo"], check=True)
    try:
        yield HOST_HELD_METADATA
    finally:
        subprocess.run(["ip", "addr", "del", address, "dev", "lo"], check=True)


@requires_docker
async def test_docker_sockets_bound_to_the_interface_never_reach_a_metadata_address_the_host_holds(
    workspace: Path, host_held_metadata: str
) -> None:
    """The host holds a metadata address (as EKS Pod Identity's agent does), so it answers ARP
    for it on the bridge. A socket bound to the container's interface is not held by the
    prohibit routes (its failed lookup means "on this link"): before the sink it asked by ARP,
    got the host's answer and connected. Now it never sends an ARP request for the range and
    never connects, while the host reaches the address itself."""
    listener = Listener(host_held_metadata)
    try:
        box = make_sandbox("docker", workspace, network_enabled=True)
        try:
            target = (host_held_metadata, listener.port)
            result = await box.run_python(f"TARGET = {target!r}\n{BOUND_PROBE}")
        finally:
            await box.cleanup()
    finally:
        listener.close()
    assert result.exit_code == 0, result.stderr
    seen = json.loads(result.stdout.splitlines()[-1])
    assert len(seen["outcomes"]) == 2 and "connected" not in seen["outcomes"], seen
    assert listener.accepted == 0, seen
    assert seen["neighbours"] == [SINK_GATEWAY], seen  # no ARP request for the address


#: AWS's IPv6 metadata address: no route to it, whether or not the container has IPv6.
METADATA_PROBE_V6 = """
import errno, json, socket, time
sock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
sock.settimeout(5)
started = time.monotonic()
try:
    sock.connect(("fd00:ec2::254", 80))
    outcome = "connected"
except OSError as exc:
    outcome = errno.errorcode.get(exc.errno, str(exc))
print(json.dumps([outcome, round(time.monotonic() - started, 3)]))
"""


async def test_the_blocked_addresses_are_the_metadata_services() -> None:
    import ipaddress

    from app.sandbox.netblock import blocked_networks

    networks = blocked_networks()
    for address in ("169.254.169.254", "169.254.170.2", "fd00:ec2::254"):
        assert any(ipaddress.ip_address(address) in n for n in networks), address
    assert not any(ipaddress.ip_address("10.0.2.2") in n for n in networks)
