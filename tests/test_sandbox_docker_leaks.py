"""No sandbox container outlives its run: an agent process that exits without cleaning up,
one stopped with Ctrl-C, and one killed with ``kill -9`` (its reaper removes the container at
once; one killed together with its reaper is reaped by the next run's start) leave nothing; a
live agent's containers are never taken. Tier e2e (real engine).

The agents are started as a terminal starts a program (SIGINT at its default): a suite run in
the background (``nohup bash scripts/test.sh &``) ignores SIGINT, and an ignored signal stays
ignored across fork and exec, so Ctrl-C would never reach them. Whatever a test leaves behind
when it fails is removed by its own cleanup."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from app.config import SandboxSettings
from app.sandbox.docker import OWNER_LABEL, DockerSandbox
from tests.sandbox_utils import DOCKER_IMAGE, requires_docker
from tests.test_main_e2e import as_from_a_terminal

pytestmark = [pytest.mark.e2e, requires_docker]

ROOT = Path(__file__).resolve().parent.parent

_AGENT = """
import asyncio, sys
from app.config import SandboxSettings
from app.sandbox.docker import DockerSandbox

async def main() -> None:
    box = DockerSandbox(SandboxSettings(backend="docker", image=sys.argv[1]), sys.argv[2])
    print((await box.run("echo ready")).stdout.strip(), box.container_id, flush=True)
    if sys.argv[3] == "wait":
        await asyncio.Event().wait()  # until Ctrl-C or a kill

asyncio.run(main())
"""


def container(container_id: str) -> dict[str, str] | None:
    """The container's labels, None if it does not exist."""
    import docker

    client = docker.from_env()
    try:
        return dict(client.containers.get(container_id).labels)
    except docker.errors.NotFound:
        return None
    finally:
        client.close()


def remove(container_id: str) -> None:
    import docker

    client = docker.from_env()
    try:
        with contextlib.suppress(docker.errors.NotFound):
            client.containers.get(container_id).remove(force=True)
    finally:
        client.close()


def gone_within(container_id: str, seconds: float) -> bool:
    """Whether the container is gone, polled up to ``seconds``."""
    deadline = time.monotonic() + seconds
    while container(container_id) is not None:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def reapers_of(pid: int) -> list[int]:
    """The agent's reaper processes (children running app/sandbox/reaper.py, started by any
    of its threads)."""
    children = [c for t in Path(f"/proc/{pid}/task").iterdir() for c in _children(t)]
    found = []
    for child in children:
        with contextlib.suppress(OSError):
            if b"reaper.py" in Path(f"/proc/{child}/cmdline").read_bytes():
                found.append(int(child))
    return found


def _children(task: Path) -> list[str]:
    try:
        return (task / "children").read_text().split()
    except OSError:  # the thread ended meanwhile
        return []


class Agents:
    """The agent processes of one test: each stopped, and its container removed, at the end
    whatever happened (a failed test leaves nothing behind)."""

    def __init__(self) -> None:
        self.started: list[tuple[asyncio.subprocess.Process, str]] = []

    async def start(self, workspace: Path, mode: str) -> tuple[asyncio.subprocess.Process, str]:
        """An agent process holding a started docker sandbox; (process, container id)."""
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = await asyncio.create_subprocess_exec(
            *as_from_a_terminal("-c", _AGENT, DOCKER_IMAGE, str(workspace), mode),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )
        self.started.append((proc, ""))
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 120)).decode().split()
        assert line and line[0] == "ready", line
        self.started[-1] = (proc, line[1])
        return proc, line[1]

    async def close(self) -> None:
        for proc, container_id in self.started:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
            if container_id:
                remove(container_id)


@pytest.fixture
async def agents() -> AsyncIterator[Agents]:
    started = Agents()
    try:
        yield started
    finally:
        await started.close()


async def test_an_agent_that_exits_without_cleanup_leaves_no_container(
    tmp_path: Path, agents: Agents
) -> None:
    proc, container_id = await agents.start(tmp_path / "ws", "exit")
    assert await asyncio.wait_for(proc.wait(), 60) == 0
    assert container(container_id) is None


async def test_ctrl_c_removes_the_agents_containers(tmp_path: Path, agents: Agents) -> None:
    proc, container_id = await agents.start(tmp_path / "ws", "wait")
    labels = container(container_id)
    assert labels is not None and labels[OWNER_LABEL].split("/")[2] == str(proc.pid)
    proc.send_signal(signal.SIGINT)
    await asyncio.wait_for(proc.wait(), 60)
    assert proc.returncode != -signal.SIGKILL
    assert container(container_id) is None


async def test_after_kill_9_the_reaper_removes_the_container(
    tmp_path: Path, agents: Agents
) -> None:
    proc, container_id = await agents.start(tmp_path / "ws", "wait")
    assert reapers_of(proc.pid)
    proc.kill()  # SIGKILL: no cleanup, no atexit
    await proc.wait()
    assert gone_within(container_id, 30)


async def test_killed_with_its_reaper_the_next_start_reaps_and_spares_live_agents(
    tmp_path: Path, agents: Agents
) -> None:
    killed, orphan = await agents.start(tmp_path / "a", "wait")
    live, kept = await agents.start(tmp_path / "b", "wait")
    for reaper in reapers_of(killed.pid):  # the whole process tree killed at once
        os.kill(reaper, signal.SIGKILL)
    killed.kill()  # SIGKILL: no cleanup, no atexit
    await killed.wait()
    assert container(orphan) is not None  # left behind, for now
    box = DockerSandbox(SandboxSettings(backend="docker", image=DOCKER_IMAGE), tmp_path / "c")
    try:
        await box.start()
        assert container(orphan) is None  # its owner is gone: removed
        assert container(kept) is not None  # its owner is alive: untouched
    finally:
        await box.cleanup()
    live.send_signal(signal.SIGINT)
    await asyncio.wait_for(live.wait(), 60)
    assert container(kept) is None
