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
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from app.testing import ScriptedLLMServer, call, slow, text, tool_calls
from tests.proc_utils import ROOT, alive
from tests.sandbox_utils import BACKENDS, sandbox_section
from tests.test_main_e2e import child_env, write_config

pytestmark = pytest.mark.e2e

#: Starts a ``setsid`` child and a double-forked daemon (its own session, parent gone), both
#: outliving the run, and prints their pids (as the sandbox sees them).
ESCAPE = textwrap.dedent("""
    import os, subprocess, time
    setsid = subprocess.Popen(["setsid", "sleep", "335"])
    read, write = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.write(write, str(os.getpid()).encode())
            os.execvp("sleep", ["sleep", "336"])
        os._exit(0)
    os.wait()
    daemon = int(os.read(read, 32))
    print(setsid.pid, daemon)
""")
#: The shell's own escape: a background job in a session of its own.
SHELL_ESCAPE = "setsid sleep 337 > /dev/null 2>&1 < /dev/null & echo started"


def sleepers() -> dict[int, str]:
    """Live ``sleep 335/336/337`` processes on this host (any namespace), by pid."""
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ").strip()
        except OSError:
            continue
        if cmdline in (b"sleep 335", b"sleep 336", b"sleep 337") and alive(int(name)):
            found[int(name)] = cmdline.decode()
    return found


def wait_until(condition: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.fixture
def no_stray_sleepers() -> Iterator[set[int]]:
    """The sleepers of this test (and of a failed one: killed at the end whatever happened)."""
    before = set(sleepers())
    yield before
    for pid in set(sleepers()) - before:
        os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("backend", BACKENDS)
def test_kill_9_of_main_py_leaves_no_process_it_started(
    backend: str, tmp_path: Path, llm_server: ScriptedLLMServer, no_stray_sleepers: set[int]
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    llm_server.push(
        tool_calls(call("python_execute", {"code": ESCAPE})),
        tool_calls(call("bash", {"command": SHELL_ESCAPE})),
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
        started = {p: c for p, c in sleepers().items() if p not in no_stray_sleepers}
        # The shell's job; on local also python_execute's two (bubblewrap and docker kill
        # everything a run started when it ends, setsid or not).
        expected = {"sleep 337"} | ({"sleep 335", "sleep 336"} if backend == "local" else set())
        assert set(started.values()) == expected, sleepers()
    finally:
        proc.kill()  # SIGKILL: no cleanup, no atexit, no finally
        proc.wait()
    assert wait_until(lambda: not (set(sleepers()) & set(started)), 30), sleepers()


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
    tmp_path: Path, no_stray_sleepers: set[int]
) -> None:
    """The fallback where no cgroup can be made (a normal user; cgroup v2 without
    delegation): what left the run's session still carries the sandbox's marker."""
    agent = await asyncio.create_subprocess_exec(
        sys.executable, "-I", "-c", _AGENT, ESCAPE, str(tmp_path), SHELL_ESCAPE,
        stdout=asyncio.subprocess.PIPE, cwd="/",
    )  # fmt: skip
    try:
        assert agent.stdout is not None
        line = await asyncio.wait_for(agent.stdout.readline(), 120)
        python_out, shell_out, mode = json.loads(line)
        assert mode == "watchdog" and "started" in shell_out, line
        started = set(sleepers()) - no_stray_sleepers
        assert {int(p) for p in python_out.split()} <= started and len(started) == 3
    finally:
        agent.kill()
        await agent.wait()
    assert await asyncio.to_thread(wait_until, lambda: not (set(sleepers()) & started), 30)
