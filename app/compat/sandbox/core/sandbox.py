"""Upstream compatibility: ``DockerSandbox``, one container with upstream's interface on
*container* paths (relative ones from ``work_dir``, ``..`` refused), run as the container's
user. The container is our ``docker`` backend's; ``work_dir`` is a private host directory
removed by ``cleanup()`` unless ``volume_bindings`` or ``workspace`` names one."""

from __future__ import annotations

import asyncio
import io
import os
import posixpath
import shutil
import socket
import tarfile
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from app.compat.sandbox.core.terminal import AsyncDockerizedTerminal
from app.config import SandboxSettings
from app.exceptions import SandboxError, SandboxTimeoutError, UnsupportedFeatureError
from app.sandbox.archive import MAX_ARCHIVE_BYTES, make_tar, safe_extract
from app.sandbox.docker import DockerSandbox as DockerBackend
from app.sandbox.factory import create_sandbox, current_settings
from app.sandbox.files import write_confined

if TYPE_CHECKING:
    from app.sandbox.base import Sandbox

__all__ = ["DockerSandbox", "SandboxSettings", "UpstreamSandbox", "copy_out"]


def _workspace_from_bindings(
    settings: SandboxSettings, volume_bindings: dict[str, str] | None
) -> str | None:
    """Upstream mounted ``{host_dir: container_dir}``; ours mounts one workspace at work_dir."""
    if not volume_bindings:
        return None
    if len(volume_bindings) == 1:
        host, inside = next(iter(volume_bindings.items()))
        if inside.rstrip("/") == settings.work_dir.rstrip("/"):
            return host
    raise UnsupportedFeatureError(
        f"volume_bindings {volume_bindings!r}: this sandbox mounts one workspace directory at "
        f"[sandbox] work_dir ({settings.work_dir}); pass {{host_dir: {settings.work_dir!r}}} "
        "or set the workspace instead"
    )


class UpstreamSandbox:
    """One of our sandboxes behind upstream's method names (``create``, ``run_command``,
    text ``read_file``/``write_file``, ``copy_from``/``copy_to``, ``cleanup``)."""

    def __init__(
        self,
        config: SandboxSettings | None = None,
        volume_bindings: dict[str, str] | None = None,
        *,
        backend: str | None = None,
    ) -> None:
        self.config = config if config is not None else current_settings()
        workspace = _workspace_from_bindings(self.config, volume_bindings)
        self.sandbox: Sandbox = create_sandbox(self.config, workspace, backend=backend)

    async def create(self) -> Self:
        await self.sandbox.start()
        return self

    async def run_command(self, cmd: str, timeout: int | None = None) -> str:
        """Run ``cmd`` with bash; its output (stdout then stderr). Raises on timeout."""
        result = await self.sandbox.run(cmd, timeout=timeout)
        if result.timed_out:
            limit = timeout or self.sandbox.limits.timeout
            raise SandboxTimeoutError(f"Command timed out after {limit} seconds: {cmd}")
        return result.stdout + result.stderr

    async def read_file(self, path: str) -> str:
        try:
            data = await self.sandbox.read_file(path)
        except OSError as e:
            raise SandboxError(f"Failed to read {path}: {e}") from e
        return data.decode("utf-8", errors="replace")

    async def write_file(self, path: str, content: str) -> None:
        try:
            await self.sandbox.write_file(path, content.encode("utf-8"))
        except OSError as e:
            raise SandboxError(f"Failed to write {path}: {e}") from e

    async def copy_from(self, src_path: str, dst_path: str) -> None:
        """A workspace file of the sandbox copied to ``dst_path`` on the host (:func:`copy_out`)."""
        data = await self.sandbox.read_file(src_path)
        await asyncio.to_thread(
            copy_out, data, Path(dst_path), self.sandbox.workspace, self.sandbox.file_owner
        )

    async def copy_to(self, src_path: str, dst_path: str) -> None:
        """A host file copied into the sandbox's workspace as ``dst_path``."""
        data = await asyncio.to_thread(Path(src_path).read_bytes)
        await self.sandbox.write_file(dst_path, data)

    async def cleanup(self) -> None:
        await self.sandbox.cleanup()

    async def __aenter__(self) -> Self:
        return await self.create()

    async def __aexit__(self, *exc: Any) -> None:
        await self.cleanup()


def copy_out(data: bytes, target: Path, workspace: Path, owner: tuple[int, int] | None) -> None:
    """Write a file copied out of a sandbox: confined beneath the workspace when it lands
    there (sandboxed code may have planted links), else in the operator's own directory."""
    target = Path(os.path.abspath(target))
    for root in (Path(os.path.abspath(workspace)), Path(os.path.realpath(workspace))):
        if target != root and target.is_relative_to(root):
            write_confined(root, target.relative_to(root).parts, data, owner=owner)
            return
    target.parent.mkdir(parents=True, exist_ok=True)  # the operator's own directory
    write_confined(target.parent, (target.name,), data)


#: Largest file read_file returns (a hostile container could offer an endless one).
MAX_READ_BYTES = 64 * 1024 * 1024


class DockerSandbox(UpstreamSandbox):
    """A Docker container with upstream's methods (see the module docstring)."""

    def __init__(
        self,
        config: SandboxSettings | None = None,
        volume_bindings: dict[str, str] | None = None,
        *,
        workspace: str | os.PathLike[str] | None = None,
    ) -> None:
        self.config = config if config is not None else SandboxSettings()
        self.volume_bindings = dict(volume_bindings or {})
        work_dir = self.config.work_dir.rstrip("/") or "/"
        extra = {h: c for h, c in self.volume_bindings.items() if c.rstrip("/") != work_dir}
        bound = [h for h, c in self.volume_bindings.items() if c.rstrip("/") == work_dir]
        self._private_dir: str | None = None
        if bound:
            workspace = bound[-1]
        elif workspace is None:
            self._private_dir = tempfile.mkdtemp(prefix="openmanus-sandbox-")
            workspace = self._private_dir
        self.sandbox: DockerBackend = DockerBackend(self.config, workspace, volume_bindings=extra)
        self.terminal: AsyncDockerizedTerminal | None = None

    @property
    def container(self) -> Any:
        """The Docker SDK container (None before ``create`` and after ``cleanup``)."""
        return self.sandbox.container

    @property
    def client(self) -> Any:
        """The Docker SDK client (None before ``create`` and after ``cleanup``)."""
        return self.sandbox.client

    async def create(self) -> Self:
        """Start the container and its terminal; on failure nothing is left behind."""
        try:
            await self.sandbox.start()
            self.terminal = AsyncDockerizedTerminal(
                self.sandbox.container,
                self.config.work_dir,
                env_vars={"PYTHONUNBUFFERED": "1"},
                default_timeout=self.config.timeout,
                sandbox=self.sandbox,
            )
            await self.terminal.init()
        except BaseException:
            await self.cleanup()
            raise
        return self

    async def cleanup(self) -> None:
        """Close the terminal, remove the container and the private work directory."""
        terminal, self.terminal = self.terminal, None
        try:
            if terminal is not None:
                await terminal.close()
        finally:
            await self.sandbox.cleanup()
            if self._private_dir is not None:
                await asyncio.to_thread(shutil.rmtree, self._private_dir, True)

    def _require(self) -> AsyncDockerizedTerminal:
        if self.terminal is None or self.sandbox.container is None:
            raise SandboxError("Sandbox not initialized: await create() first")
        return self.terminal

    async def run_command(self, cmd: str, timeout: int | None = None) -> str:
        """Output of ``cmd`` in the sandbox's shell; SandboxTimeoutError past ``timeout``."""
        terminal = self._require()
        limit = timeout or self.config.timeout
        try:
            return await terminal.run_command(cmd, timeout=limit)
        except TimeoutError:
            raise SandboxTimeoutError(
                f"Command execution timed out after {limit} seconds"
            ) from None

    def _safe_resolve_path(self, path: str) -> str:
        """A container path: relative ones from ``work_dir``; ``..`` refused as upstream did."""
        if ".." in str(path).split("/"):
            raise SandboxError(f"Path contains potentially unsafe patterns: {path!r}")
        return posixpath.join(self.config.work_dir, path) if not path.startswith("/") else path

    async def read_file(self, path: str) -> str:
        """Text of a file in the container; FileNotFoundError if there is none."""
        self._require()
        resolved = self._safe_resolve_path(path)
        argv = ["head", "-c", str(MAX_READ_BYTES + 1), "--", resolved]
        code, out, err = await self._exec(argv, max_output=MAX_READ_BYTES + 1)
        if code != 0:
            message = err.strip()
            if "No such file" in message:
                raise FileNotFoundError(f"File not found: {path}")
            if "Is a directory" in message:
                raise IsADirectoryError(f"{path} is a directory")
            raise SandboxError(f"Failed to read file {path}: {message}")
        if len(out) > MAX_READ_BYTES:
            raise SandboxError(f"{path} is larger than {MAX_READ_BYTES} bytes")
        return out.decode("utf-8", errors="replace")

    async def write_file(self, path: str, content: str) -> None:
        """Write a file in the container (parents created) as the container's user: written
        by ``cat`` inside, so the container's own rules apply (a read-only root, ``/tmp``)."""
        self._require()
        resolved = self._safe_resolve_path(path)
        script = 'mkdir -p -- "$(dirname -- "$1")" && cat > "$1"'
        code, _, err = await self._exec(["sh", "-c", script, "sh", resolved], content.encode())
        if code != 0:
            raise SandboxError(f"Failed to write {path}: {err.strip()}")

    async def _exec(
        self, argv: list[str], data: bytes = b"", max_output: int = 0
    ) -> tuple[int, bytes, str]:
        """Run ``argv`` in the container as its user, ``data`` on its stdin: (exit code,
        stdout, stderr). More than ``max_output`` bytes of stdout is a SandboxError (a
        hostile container can produce endless output)."""

        def work() -> tuple[int, bytes, str]:
            from docker.utils.socket import frames_iter

            api = self.sandbox.client.api
            exec_id = api.exec_create(
                self.sandbox.container.id,
                argv,
                stdin=True,
                stdout=True,
                stderr=True,
                user=self.sandbox.user,
            )["Id"]
            stream = api.exec_start(exec_id, socket=True)
            sock = stream._sock if hasattr(stream, "_sock") else stream
            output, errors = bytearray(), bytearray()
            try:
                view = memoryview(data)
                for offset in range(0, len(view), 65536):
                    sock.sendall(view[offset : offset + 65536])
                sock.shutdown(socket.SHUT_WR)
                for stream_id, chunk in frames_iter(stream, tty=False):
                    if stream_id == 2:
                        if len(errors) < 65536:
                            errors += chunk
                    elif max_output:
                        output += chunk
                        if len(output) > max_output:
                            raise SandboxError(
                                f"more than {max_output} bytes came out of the sandbox"
                            )
            finally:
                sock.close()
            code = api.exec_inspect(exec_id).get("ExitCode")
            code = int(code) if isinstance(code, int) else 1
            return code, bytes(output), errors.decode(errors="replace")

        return await asyncio.to_thread(work)

    async def copy_from(self, src_path: str, dst_path: str) -> None:
        """Copy a container file (or a directory into an existing host one) to ``dst_path``."""
        self._require()
        resolved = self._safe_resolve_path(src_path)
        # Packed by tar inside, as the container's user (it sees /tmp; the archive API does
        # not); through the engine's archive API when the image has no tar.
        script = (
            "command -v tar >/dev/null || exit 127; "
            '[ -e "$1" ] || { echo "$1: No such file" >&2; exit 3; }; '
            'cd -- "$(dirname -- "$1")" && exec tar -c -f - -- "$(basename -- "$1")"'
        )
        argv = ["sh", "-c", script, "sh", resolved]
        code, data, err = await self._exec(argv, max_output=MAX_ARCHIVE_BYTES)
        if code == 127:
            data = await asyncio.to_thread(self._get_archive, resolved, src_path)
        elif code == 3:
            raise FileNotFoundError(f"Source file not found: {src_path}")
        elif code != 0:
            raise SandboxError(f"Failed to copy {src_path} out: {err.strip()}")
        target = Path(dst_path)
        if await asyncio.to_thread(target.is_dir):
            await asyncio.to_thread(safe_extract, data, target)
            return
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
            members = tar.getmembers()
            if not members:
                raise FileNotFoundError(f"Source file not found: {src_path}")
            if len(members) > 1 or members[0].isdir():
                raise SandboxError(
                    f"Source path is a directory but destination is a file: {src_path}"
                )
            if not members[0].isfile():
                raise SandboxError(f"{src_path} is not a regular file (a link or device)")
            extracted = tar.extractfile(members[0])
            content = extracted.read() if extracted is not None else b""
        await asyncio.to_thread(
            copy_out, content, target, self.sandbox.workspace, self.sandbox.file_owner
        )

    def _get_archive(self, resolved: str, src_path: str) -> bytes:
        """The engine's tar archive of ``resolved`` (bounded), for an image without ``tar``."""
        from docker.errors import NotFound

        try:
            stream, _ = self.sandbox.container.get_archive(resolved)
            chunks, size = [], 0
            for chunk in stream:
                size += len(chunk)
                if size > MAX_ARCHIVE_BYTES:
                    raise SandboxError(f"{resolved} is too large to copy out")
                chunks.append(chunk)
        except NotFound:
            raise FileNotFoundError(f"Source file not found: {src_path}") from None
        return b"".join(chunks)

    async def copy_to(self, src_path: str, dst_path: str) -> None:
        """Copy a host file or directory into the container as ``dst_path``: unpacked by
        ``tar`` inside, as the container's user (like :meth:`write_file`); through the
        engine's archive API when the image has no ``tar``."""
        self._require()
        source = Path(src_path)
        if not await asyncio.to_thread(source.exists):
            raise FileNotFoundError(f"Source file not found: {src_path}")
        resolved = self._safe_resolve_path(dst_path)
        parent = posixpath.dirname(resolved) or "/"
        data = await asyncio.to_thread(make_tar, source, posixpath.basename(resolved))
        script = (
            'mkdir -p -- "$1" || exit 1; command -v tar >/dev/null || exit 127; '
            'tar -x --no-same-owner -f - -C "$1"'
        )
        code, _, err = await self._exec(["sh", "-c", script, "sh", parent], data)
        if code == 127:  # no tar in the image: the engine's archive API
            from docker.errors import APIError

            try:
                done = await asyncio.to_thread(self.sandbox.container.put_archive, parent, data)
            except APIError as exc:
                raise SandboxError(f"Failed to write {dst_path}: {exc.explanation or exc}") from exc
            if not done:
                raise SandboxError(f"Failed to write {dst_path}")
            if (await self._exec(["test", "-e", resolved]))[0] != 0:
                raise SandboxError(f"Failed to verify file creation: {dst_path}")
        elif code != 0:
            raise SandboxError(f"Failed to copy {src_path} to {dst_path}: {err.strip()}")
