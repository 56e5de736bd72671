"""No sandbox container outlives its run: an agent process that exits without cleaning up,
one stopped with Ctrl-C, and one killed with ``kill -9`` (reaped by the next run's start)
leave nothing; a live agent's containers are never taken. Tier e2e (real engine)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from app.config import SandboxSettings
from app.sandbox.docker import OWNER_LABEL, DockerSandbox
from tests.sandbox_utils import DOCKER_IMAGE, requires_docker

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


async def start_agent(workspace: Path, mode: str) -> tuple[asyncio.subprocess.Process, str]:
    """An agent process holding a started docker sandbox; (process, container id)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _AGENT,
        DOCKER_IMAGE,
        str(workspace),
        mode,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    assert proc.stdout is not None
    line = (await asyncio.wait_for(proc.stdout.readline(), 120)).decode().split()
    assert line and line[0] == "ready", line
    return proc, line[1]


async def test_an_agent_that_exits_without_cleanup_leaves_no_container(tmp_path: Path) -> None:
    proc, container_id = await start_agent(tmp_path / "ws", "exit")
    assert await asyncio.wait_for(proc.wait(), 60) == 0
    assert container(container_id) is None


async def test_ctrl_c_removes_the_agents_containers(tmp_path: Path) -> None:
    proc, container_id = await start_agent(tmp_path / "ws", "wait")
    try:
        labels = container(container_id)
        assert labels is not None and labels[OWNER_LABEL].split("/")[2] == str(proc.pid)
        proc.send_signal(signal.SIGINT)
        await asyncio.wait_for(proc.wait(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert container(container_id) is None


async def test_after_kill_9_the_next_start_reaps_and_spares_live_agents(tmp_path: Path) -> None:
    killed, orphan = await start_agent(tmp_path / "a", "wait")
    live, kept = await start_agent(tmp_path / "b", "wait")
    try:
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
    finally:
        for proc in (killed, live):
            if proc.returncode is None:
                proc.send_signal(signal.SIGINT)
                try:
                    await asyncio.wait_for(proc.wait(), 60)
                except TimeoutError:
                    proc.kill()
                    await proc.wait()
    assert container(kept) is None
