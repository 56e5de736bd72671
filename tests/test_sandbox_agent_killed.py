"""``kill -9`` of the agent leaves nothing it started behind (issue 37; docs/getting-started.md
promises it on every backend): the real main.py, mid-run (waiting on the scripted model), after
its tools started a ``setsid`` child, a double-forked daemon and a shell's background job.

On ``local`` the reaper (app/sandbox/reaper.py), a process of its own that outlives the agent,
kills them: through the sandbox's cgroup where there is one (root here), and through the
sandbox's marker in their environment without one (checked below on a sandbox that has no
cgroup). On ``bubblewrap`` they die with the PID namespace, on ``docker`` with the container,
which the reaper removes.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import select
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from app.testing import ScriptedLLMServer, call, slow, text, tool_calls
from tests.proc_utils import ROOT, alive
from tests.sandbox_utils import BACKENDS, sandbox_section
from tests.test_main_e2e import child_env, write_config

pytestmark = pytest.mark.e2e

#: Starts a ``setsid`` child and a double-forked daemon (its own session, parent gone), both
#: outliving the run, and prints their pids (as the sandbox sees them). ``{a}``/``{b}``: the
#: test's own sleep lengths.
ESCAPE = textwrap.dedent("""
    import os, subprocess, time
    setsid = subprocess.Popen(["setsid", "sleep", "{a}"])
    read, write = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.write(write, str(os.getpid()).encode())
            os.execvp("sleep", ["sleep", "{b}"])
        os._exit(0)
    os.wait()
    daemon = int(os.read(read, 32))
    print(setsid.pid, daemon)
""")
#: The shell's own escape: a background job in a session of its own.
SHELL_ESCAPE = "setsid sleep {c} > /dev/null 2>&1 < /dev/null & echo started"


class Sleeps:
    """One test's three sleep lengths (335, 336, 337 seconds and a fraction unique to the
    test), so that tests running side by side never count each other's sleepers."""

    def __init__(self) -> None:
        tag = f"{os.getpid()}{secrets.randbelow(10**6):06d}"
        self.a, self.b, self.c = (f"{n}.{tag}" for n in (335, 336, 337))

    @property
    def escape(self) -> str:
        return ESCAPE.replace("{a}", self.a).replace("{b}", self.b)

    @property
    def shell_escape(self) -> str:
        return SHELL_ESCAPE.replace("{c}", self.c)

    def live(self) -> dict[int, str]:
        """This test's live sleepers on this host (any namespace), by pid, as ``a``/``b``/``c``."""
        wanted = {f"sleep {length}".encode(): name for name, length in vars(self).items()}
        found = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                continue
            name = wanted.get(cmdline.strip())
            if name is not None and alive(int(entry)):
                found[int(entry)] = name
        return found


def all_exit_within(pids: Iterable[int], seconds: float) -> bool:
    """Whether every process of ``pids`` exits within ``seconds``: the kernel says so through
    a pidfd (readable once the process is gone), for any process, child of ours or not."""
    fds = []
    try:
        for pid in pids:
            try:
                fds.append(os.pidfd_open(pid))
            except ProcessLookupError:
                continue  # already gone
        waiting = select.poll()
        for fd in fds:
            waiting.register(fd, select.POLLIN)
        left, deadline = len(fds), time.monotonic() + seconds
        while left:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            for fd, _ in waiting.poll(remaining * 1000):
                waiting.unregister(fd)
                left -= 1
        return True
    finally:
        for fd in fds:
            os.close(fd)


@pytest.fixture
def sleeps() -> Iterator[Sleeps]:
    """This test's sleep lengths; its sleepers are killed at the end whatever happened."""
    mine = Sleeps()
    yield mine
    for pid in mine.live():
        os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("backend", BACKENDS)
def test_kill_9_of_main_py_leaves_no_process_it_started(
    backend: str, tmp_path: Path, llm_server: ScriptedLLMServer, sleeps: Sleeps
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    llm_server.push(
        tool_calls(call("python_execute", {"code": sleeps.escape})),
        tool_calls(call("bash", {"command": sleeps.shell_escape})),
        slow(120, text("too late")),  # main.py waits here, mid-run, when it is killed
    )
    cfg = write_config(tmp_path, llm_server.base_url)
    cfg.write_text(cfg.read_text() + sandbox_section(backend))
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "main.py"), "-c", str(cfg), "-w", str(workspace), "-p", "x"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=child_env(tmp_path),
        cwd=tmp_path,
    )
    try:
        assert llm_server.wait_for_requests(3, timeout=180), proc.stderr
        started = sleeps.live()
        # The shell's job; on local also python_execute's two (bubblewrap and docker kill
        # everything a run started when it ends, setsid or not).
        expected = {"c"} | ({"a", "b"} if backend == "local" else set())
        assert sorted(started.values()) == sorted(expected), started
    finally:
        proc.kill()  # SIGKILL: no cleanup, no atexit, no finally
        proc.wait()
    assert all_exit_within(started, 30), sleeps.live()


_AGENT = """
import asyncio, json, sys
from app.config import SandboxSettings
from app.sandbox.factory import create_sandbox
from app.sandbox.guard import ProcessGuard
from app.tool.bash import Bash
from app.tool.python_execute import PythonExecute

async def main():
    box = create_sandbox(SandboxSettings(backend="local"), sys.argv[2])
    box.guard = ProcessGuard(box.limits.max_processes, use_cgroup=False)
    out = await PythonExecute(sandbox=box).execute(code=sys.argv[1])
    shell = await Bash(sandbox=box).execute(command=sys.argv[3])
    print(json.dumps([out["observation"], str(shell), box.guard.mode]), flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""


async def test_without_a_cgroup_the_reaper_finds_them_by_their_marker(
    tmp_path: Path, sleeps: Sleeps
) -> None:
    """The fallback where no cgroup can be made (a normal user; cgroup v2 without
    delegation): what left the run's session still carries the sandbox's marker."""
    agent = await asyncio.create_subprocess_exec(
        sys.executable, "-I", "-c", _AGENT, sleeps.escape, str(tmp_path), sleeps.shell_escape,
        stdout=asyncio.subprocess.PIPE, cwd="/",
    )  # fmt: skip
    try:
        assert agent.stdout is not None
        line = await asyncio.wait_for(agent.stdout.readline(), 120)
        python_out, shell_out, mode = json.loads(line)
        assert mode == "watchdog" and "started" in shell_out, line
        started = sleeps.live()
        assert {int(p) for p in python_out.split()} <= set(started)
        assert sorted(started.values()) == ["a", "b", "c"], started
    finally:
        agent.kill()
        await agent.wait()
    assert await asyncio.to_thread(all_exit_within, started, 30), sleeps.live()
