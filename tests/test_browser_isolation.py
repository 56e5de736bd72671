"""The browser we start is no way out of the sandbox: Chromium does not run as root, keeps
its own sandbox, and sandboxed code on bubblewrap (network enabled) cannot drive its DevTools.

The hostile scenario replays the reported attack: model-written code looks for the browser's
DevTools port on 127.0.0.1 (reading ``DevToolsActivePort``, scanning every port) to send CDP
commands such as ``DOM.setFileInputFiles`` (reads any file Chromium can) or
``Browser.setDownloadBehavior`` (writes anywhere it can).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import socket
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from app.config import BrowserSettings
from app.tool.browser.launcher import browser_user
from app.tool.browser.runtime import BrowserRuntime
from app.tool.python_execute import PythonExecute
from tests.sandbox_utils import make_sandbox, requires_bwrap
from tests.web_fixtures import isolated_tempdir

pytest.importorskip("browser_use")  # the browser extra

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="module")]

IS_ROOT = os.geteuid() == 0
INIT_USERNS = os.readlink("/proc/self/ns/user")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def runtime() -> AsyncIterator[BrowserRuntime]:
    with isolated_tempdir():
        browser = BrowserRuntime(BrowserSettings(headless=True))
        try:
            async with browser.lock:
                await browser.ensure()
            yield browser
        finally:
            await browser.close()


def _group(pgid: int) -> list[int]:
    """Live processes of Chromium's process group (browser, zygotes, renderers, GPU...)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fields = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] not in ("Z", "X") and int(fields[2]) == pgid:
            found.append(int(name))
    return found


def _http_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as e:
        return e.code


def _relay_port(cdp_url: str) -> int:
    parsed = urllib.parse.urlsplit(cdp_url)
    assert parsed.scheme == "ws" and parsed.hostname == "127.0.0.1", cdp_url
    assert parsed.port is not None
    return parsed.port


def _listening_inodes() -> set[str]:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A":  # LISTEN
                inodes.add(fields[9])
    return inodes


def _tcp_listeners(pids: list[int]) -> list[tuple[int, str]]:
    """(pid, inode) of every listening TCP socket the processes hold."""
    listening = _listening_inodes()
    found = []
    for pid in pids:
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                    if target.startswith("socket:[") and target[8:-1] in listening:
                        found.append((pid, target))
    return found


def _status(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return dict(line.split(":\t", 1) for line in lines if ":\t" in line)


def _check_unprivileged(pids: list[int], user: tuple[int, int]) -> None:
    for pid in pids:
        status = _status(pid)
        assert set(status["Uid"].split()) == {str(user[0])}, (pid, status["Uid"])
        assert set(status["Gid"].split()) == {str(user[1])}, (pid, status["Gid"])
        assert status["Groups"].split() in ([], [str(user[1])]), (pid, status["Groups"])
        if os.readlink(f"/proc/{pid}/ns/user") == INIT_USERNS:  # else: Chromium's sandbox
            assert status["CapEff"] == "0000000000000000", (pid, status["CapEff"])
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        assert b"--no-sandbox" not in cmdline, pid
    # Chromium's sandbox is on: some of its processes run under a seccomp-bpf filter.
    assert any(_status(pid).get("Seccomp") == "2" for pid in pids)


@pytest.mark.skipif(not IS_ROOT, reason="the privilege drop happens when the agent is root")
async def test_chromium_runs_unprivileged_with_its_own_sandbox(runtime: BrowserRuntime) -> None:
    chromium = runtime.chromium
    assert chromium is not None
    pids = await asyncio.to_thread(_group, chromium.pid)
    assert len(pids) >= 3, pids  # the browser, its zygotes and helpers at least
    user = browser_user()
    assert user is not None and 0 not in user
    await asyncio.to_thread(_check_unprivileged, pids, user)
    # Its private directory (profile, downloads) belongs to that user, not root.
    info = chromium.directory.stat()
    assert (info.st_uid, info.st_gid) == user
    downloads = chromium.directory / "downloads"
    assert downloads.stat().st_uid == user[0]


async def test_browser_still_browses(runtime: BrowserRuntime) -> None:
    """The privilege drop and the pipe do not break the session browser-use drives."""
    assert await runtime.is_healthy()


async def test_devtools_is_a_pipe_behind_a_capability_url(runtime: BrowserRuntime) -> None:
    """No DevTools TCP port: Chromium listens on no TCP socket, writes no DevToolsActivePort,
    and our relay answers only its secret path, to one client."""
    chromium = runtime.chromium
    assert chromium is not None
    pids = await asyncio.to_thread(_group, chromium.pid)
    assert pids
    assert await asyncio.to_thread(_tcp_listeners, pids) == []
    assert not (chromium.directory / "profile" / "DevToolsActivePort").exists()
    raw = await asyncio.to_thread(Path(f"/proc/{chromium.pid}/cmdline").read_bytes)
    cmdline = raw.split(b"\0")
    assert b"--remote-debugging-pipe" in cmdline
    assert not any(arg.startswith(b"--remote-debugging-port") for arg in cmdline)

    port = _relay_port(chromium.cdp_url)
    base = f"http://127.0.0.1:{port}"
    token = urllib.parse.urlsplit(chromium.cdp_url).path.rsplit("/", 1)[1]
    assert len(token) >= 40
    for path in ("/json/version", "/json", "/json/list", "/", "/devtools/browser/guess"):
        assert await asyncio.to_thread(_http_status, base + path) == 404, path
    # The right URL while browser-use holds it: refused (one client at a time).
    with pytest.raises(InvalidStatus) as refused:
        async with connect(chromium.cdp_url, open_timeout=5):
            pass
    assert refused.value.response.status_code == 409
    assert await runtime.is_healthy()


@requires_bwrap
@pytest.mark.skipif(shutil.which("slirp4netns") is None, reason="needs slirp4netns")
async def test_sandboxed_code_cannot_reach_devtools(
    runtime: BrowserRuntime, tmp_path: Path
) -> None:
    chromium = runtime.chromium
    assert chromium is not None
    port = _relay_port(chromium.cdp_url)
    active_port = chromium.directory / "profile" / "DevToolsActivePort"
    # The control: from the host, the relay's port accepts connections (so the test can fail).
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        pass

    attack = f"""
import json, socket, urllib.request
found = {{"port_file": None, "cdp": {{}}, "open": []}}
try:
    found["port_file"] = open({str(active_port)!r}).read()
except OSError as e:
    found["port_file"] = f"unreadable: {{e.strerror}}"
for host in ("127.0.0.1", "10.0.2.2", "localhost"):
    try:
        with urllib.request.urlopen(f"http://{{host}}:{port}/json/version", timeout=3) as r:
            found["cdp"][host] = r.read().decode()
    except Exception as e:
        found["cdp"][host] = f"failed: {{e}}"
for candidate in range(1, 65536):
    s = socket.socket()
    s.settimeout(0.2)
    if s.connect_ex(("127.0.0.1", candidate)) == 0 and s.getsockname()[1] != candidate:
        found["open"].append(candidate)  # (a socket whose own port it is connects to itself)
    s.close()
print(json.dumps(found))
"""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    box = make_sandbox("bubblewrap", workspace, network_enabled=True, timeout=120)
    try:
        out = await PythonExecute(sandbox=box).execute(code=attack, timeout=120)
    finally:
        await box.cleanup()
    text = str(out["observation"] if isinstance(out, dict) else out)
    line = next((x for x in text.splitlines() if x.startswith("{")), None)
    assert line is not None, text
    found = json.loads(line)
    assert str(found["port_file"]).startswith("unreadable"), found
    assert all(v.startswith("failed") for v in found["cdp"].values()), found
    assert found["open"] == [], found
    # And the browser is still ours, undisturbed.
    assert await runtime.is_healthy()
