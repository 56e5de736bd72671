"""``docker``: one container per agent through the Docker SDK (the ``docker`` extra).

The container is created on the first command and removed by ``cleanup()``. It runs
unprivileged: all capabilities dropped, ``no-new-privileges``, a read-only root file system
with a private ``/tmp``, the host user's uid when that is not root, memory/CPU/process limits
from ``[sandbox]``, and no network unless ``network_enabled``. The workspace is bind-mounted
at ``work_dir``, so files need no copying; :meth:`copy_to`/:meth:`copy_from` move other files
as tar archives, extracted with every member checked (``app.sandbox.archive``).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from app.exceptions import SandboxError, SandboxUnavailableError
from app.logger import logger
from app.sandbox.archive import MAX_ARCHIVE_BYTES, make_tar, safe_extract
from app.sandbox.base import LaunchSpec, Sandbox, signal_exit_status
from app.sandbox.sizes import parse_size

__all__ = ["DockerSandbox"]

_LABEL = "openmanus.sandbox"


class DockerSandbox(Sandbox):
    """Commands run through ``docker exec`` (via a small relay process, see docker_relay)."""

    backend = "docker"
    host_processes = False  # the container's pids_limit holds the process limit

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._client: Any = None
        self._container: Any = None

    @property
    def container_id(self) -> str | None:
        return self._container.id if self._container is not None else None

    @property
    def workdir(self) -> str:
        return self.settings.work_dir

    @property
    def python(self) -> str:
        return "python3"

    @property
    def shell(self) -> str:
        return "/bin/bash"

    def _user(self) -> str:
        uid = os.getuid()
        return f"{uid}:{os.getgid()}" if uid != 0 else "0:0"

    async def _start(self) -> None:
        await asyncio.to_thread(self._start_sync)

    def _start_sync(self) -> None:
        try:
            import docker
            from docker.errors import DockerException, ImageNotFound
        except ImportError as exc:
            raise SandboxUnavailableError(
                "sandbox backend 'docker' needs the Docker SDK: pip install -e '.[docker]'"
            ) from exc
        try:
            client = docker.from_env()
            client.ping()
        except DockerException as exc:
            raise SandboxUnavailableError(
                f"sandbox backend 'docker': no Docker engine is reachable ({exc}); start "
                'Docker or set DOCKER_HOST, or use backend = "bubblewrap" or "local"'
            ) from exc
        image = self.settings.image
        try:
            try:
                client.images.get(image)
            except ImageNotFound:
                logger.info(f"pulling sandbox image {image}")
                client.images.pull(image)
            memory = parse_size(self.settings.memory_limit)
            self._container = client.containers.run(
                image,
                command=["sleep", "infinity"],
                detach=True,
                init=True,
                working_dir=self.workdir,
                user=self._user(),
                mem_limit=memory,
                memswap_limit=memory,
                nano_cpus=int(self.settings.cpu_limit * 1e9),
                pids_limit=self.settings.max_processes,
                network_mode="bridge" if self.settings.network_enabled else "none",
                volumes={str(self.workspace): {"bind": self.workdir, "mode": "rw"}},
                read_only=True,
                tmpfs={"/tmp": "rw,nosuid,nodev,size=256m"},
                cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
                privileged=False,
                labels={_LABEL: "1"},
            )
        except DockerException as exc:
            client.close()
            raise SandboxUnavailableError(f"could not start the sandbox container: {exc}") from exc
        self._client = client

    async def _cleanup(self) -> None:
        container, client = self._container, self._client
        self._container = self._client = None

        def work() -> None:
            if container is not None:
                try:
                    container.remove(force=True)
                except Exception as exc:
                    logger.warning(f"could not remove sandbox container {container.id}: {exc}")
            if client is not None:
                client.close()

        await asyncio.to_thread(work)

    def exit_status(self, returncode: int | None) -> int | None:
        return signal_exit_status(returncode)

    def _wrap(
        self, argv: list[str], rlimits: dict[str, int], env: dict[str, str], cwd: str
    ) -> LaunchSpec:
        if self._container is None:
            raise SandboxError("the docker sandbox is not started")
        options = json.dumps({"cwd": cwd, "env": env, "user": self._user()})
        relay = [sys.executable, "-m", "app.sandbox.docker_relay", self._container.id, options]
        # The relay is ours, not the model's: it keeps the agent's environment (DOCKER_HOST...).
        return LaunchSpec(argv=[*relay, "--", *argv], env=dict(os.environ), cwd=str(self.workspace))

    def to_host_path(self, path: str) -> str:
        work = self.workdir.rstrip("/")
        if path == work or path.startswith(work + "/"):
            return str(self.workspace) + path[len(work) :]
        return path

    def to_sandbox_path(self, text: str) -> str:
        return text.replace(str(self.workspace), self.workdir.rstrip("/"))

    async def copy_to(self, source: Path, container_dir: str) -> None:
        """Copy a host file or directory into ``container_dir`` (as a tar archive)."""
        await self.start()
        data = await asyncio.to_thread(make_tar, source)
        await asyncio.to_thread(self._container.put_archive, container_dir, data)

    async def copy_from(self, container_path: str, dest: Path) -> list[str]:
        """Copy a path out of the container into ``dest``; unsafe members are refused."""
        await self.start()

        def work() -> list[str]:
            stream, _ = self._container.get_archive(container_path)
            chunks, size = [], 0
            for chunk in stream:
                size += len(chunk)
                if size > MAX_ARCHIVE_BYTES:
                    raise SandboxError(f"{container_path} is too large to copy out")
                chunks.append(chunk)
            return safe_extract(b"".join(chunks), dest)

        return await asyncio.to_thread(work)
