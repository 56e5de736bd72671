"""Helpers for the sandbox tests: build a backend with small limits, find leftovers."""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.config import SandboxSettings
from app.sandbox.base import Sandbox
from app.sandbox.factory import create_sandbox
from app.sandbox.guard import empty_and_remove, find_pids_hierarchy

__all__ = [
    "BACKENDS",
    "DOCKER_IMAGE",
    "DOCKER_PROBLEM",
    "fenced",
    "make_sandbox",
    "processes_under",
    "requires_bwrap",
    "requires_docker",
    "sandbox_section",
]

requires_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bwrap is not installed (scripts/test.sh installs it)"
)

#: The image the docker tests use: built offline by scripts/setup-docker.sh.
DOCKER_IMAGE = os.environ.get("OPENMANUS_SANDBOX_IMAGE", "openmanus-sandbox:latest")


def _docker_problem() -> str | None:
    """Why no Docker test can run here (None: an engine answers). A missing image is not a
    reason: those tests then fail saying to run scripts/setup-docker.sh."""
    try:
        import docker
    except ImportError:
        return "the docker SDK is not installed (extra 'docker')"
    try:
        client = docker.from_env()
    except Exception as exc:
        return f"no Docker engine can run here ({exc}); scripts/test.sh sets one up as root"
    try:
        client.ping()
    except Exception as exc:
        return f"no Docker engine can run here ({exc}); scripts/test.sh sets one up as root"
    finally:
        client.close()
    return None


DOCKER_PROBLEM = _docker_problem()
requires_docker = pytest.mark.skipif(DOCKER_PROBLEM is not None, reason=str(DOCKER_PROBLEM))
BACKENDS = [
    pytest.param("local"),
    pytest.param("bubblewrap", marks=requires_bwrap),
    pytest.param("docker", marks=requires_docker),
]


def make_sandbox(backend: str, workspace: Path, **settings: Any) -> Sandbox:
    values: dict[str, Any] = {"backend": backend, "memory_limit": "256m", "timeout": 30}
    if backend == "docker":
        values["image"] = DOCKER_IMAGE
    values.update(settings)
    return create_sandbox(SandboxSettings(**values), workspace)


def sandbox_section(backend: str) -> str:
    """A config file's ``[sandbox]`` section for ``backend`` with the tests' small limits."""
    lines = ["", "[sandbox]", f'backend = "{backend}"']
    if backend != "local":
        lines.append('memory_limit = "256m"')
    if backend == "docker":
        lines.append(f'image = "{DOCKER_IMAGE}"')
    return "\n".join(lines) + "\n"


def _directories(directory: Path) -> set[tuple[int, int]]:
    """(device, inode) of ``directory`` and every directory below it."""
    found: set[tuple[int, int]] = set()
    for root, _, _ in os.walk(directory):
        try:
            info = os.stat(root)
        except OSError:
            continue
        found.add((info.st_dev, info.st_ino))
    return found


def processes_under(directory: Path, command: str | None = None) -> list[int]:
    """Live processes whose working directory is ``directory`` or below (any namespace: a
    container sees it at another path, so the directory itself is compared too), optionally
    only those whose command line contains ``command``."""
    found = []
    inodes = _directories(directory)
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cwd = os.readlink(f"/proc/{name}/cwd")
            state = Path(f"/proc/{name}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if state in (b"Z", b"X"):
            continue
        try:
            info = os.stat(f"/proc/{name}/cwd")
            same = (info.st_dev, info.st_ino) in inodes
        except OSError:
            same = False
        if same or cwd == str(directory) or cwd.startswith(str(directory) + "/"):
            if command is not None:
                try:
                    cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
                except OSError:
                    continue
                if command.encode() not in cmdline:
                    continue
            found.append(int(name))
    return found


def _enter_fence(base: Path, limit: int) -> Path | None:
    """A new pids cgroup under ``base`` holding at most ``limit`` tasks, with this process
    moved into it (None: the kernel refused one of the steps)."""
    fence = base / f"test-fence-{os.getpid()}-{time.monotonic_ns()}"
    try:
        fence.mkdir()
        (fence / "pids.max").write_text(str(limit))
        (fence / "cgroup.procs").write_text(str(os.getpid()))
    except OSError:
        with contextlib.suppress(OSError):
            fence.rmdir()
        return None
    return fence


@contextlib.contextmanager
def fenced(limit: int) -> Iterator[None]:
    """Run this test process (and so everything it starts) inside a pids cgroup of its own
    holding at most ``limit`` processes and threads.

    A fork bomb under the watchdog (no cgroup of the sandbox's own) grows until the watchdog
    kills it: without a fence it takes the machine's last process numbers, and the other test
    worker fails to start a thread or a shell. Where no pids hierarchy is writable this fences
    nothing, as before."""
    base = find_pids_hierarchy()
    fence = _enter_fence(base, limit) if base is not None else None
    try:
        yield
    finally:
        if base is not None and fence is not None:
            (base / "cgroup.procs").write_text(str(os.getpid()))
            empty_and_remove(fence, deadline=30)
