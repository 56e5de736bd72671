"""Upstream compatibility: the interactive Docker terminal, one ``bash`` session in a container,
run by the docker backend (:meth:`~app.sandbox.docker.DockerSandbox.command`). Each command ends
with a random marker carrying its exit status (no prompt parsing), output is bounded, and a
command over its timeout is killed with all it started (the session reopens on the next one)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import secrets
import signal
from typing import Any

from app.exceptions import SandboxError
from app.sandbox.docker import DockerSandbox as DockerBackend
from app.sandbox.docker import docker_client
from app.sandbox.processes import ProcessScope

__all__ = ["AsyncDockerizedTerminal", "DockerSession"]

#: Output kept per command (the rest is dropped, with a note saying how much).
MAX_OUTPUT_BYTES = 1024 * 1024
_SHELL = ["bash", "--noprofile", "--norc"]


class DockerSession:
    """One ``bash`` running in a container, fed commands over its stdin (through ``sandbox``,
    by default the docker backend attached to the container as its own user)."""

    def __init__(self, container_id: str, *, sandbox: DockerBackend | None = None) -> None:
        self.container_id = container_id
        if sandbox is None:
            sandbox = DockerBackend.attach(docker_client().containers.get(container_id))
        self.sandbox = sandbox
        self.process: asyncio.subprocess.Process | None = None
        self.last_exit_code: int | None = None
        self._scope: ProcessScope | None = None

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.returncode is None

    async def create(self, working_dir: str, env_vars: dict[str, str]) -> None:
        """Start the shell in ``working_dir`` with ``env_vars`` (plus a dumb terminal)."""
        env = {**env_vars, "TERM": "dumb", "PS1": "", "PS2": "", "PROMPT_COMMAND": ""}
        spec = self.sandbox.command(_SHELL, env=env, cwd=working_dir)
        self.process = await asyncio.create_subprocess_exec(
            *spec.argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=spec.env,
            cwd=spec.cwd,
            start_new_session=True,
        )
        # The container's processes carrying the run's marker: background jobs and setsid
        # included, all killed on a timeout.
        self._scope = self.sandbox.scope(self.process.pid)

    async def execute(self, command: str, timeout: float | None = None) -> str:
        """Run ``command`` in the session; its output (stripped). TimeoutError when it runs
        over ``timeout`` seconds: the command is killed and the session closed."""
        process = self.process
        if process is None or process.stdin is None or process.stdout is None:
            raise SandboxError("Session not initialized")
        if process.returncode is not None:
            raise SandboxError("the terminal session has ended (the shell exited)")
        token = secrets.token_hex(8)
        encoded = base64.b64encode(command.encode()).decode()
        script = (
            f"__om_cmd=$(printf %s {encoded} | base64 -d); "
            f'eval "$__om_cmd" </dev/null 2>&1; '
            f"printf '\\n__OM_{token}_%s__\\n' \"$?\"\n"
        )
        try:
            process.stdin.write(script.encode())
            await process.stdin.drain()
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise SandboxError(f"the terminal session has ended: {exc}") from exc
        try:
            return await asyncio.wait_for(self._read_result(token), timeout)
        except TimeoutError:
            await self.close(force=True)
            raise TimeoutError(f"Command execution timed out after {timeout} seconds") from None

    async def _read_result(self, token: str) -> str:
        assert self.process is not None and self.process.stdout is not None
        marker = f"\n__OM_{token}_".encode()  # then the exit status and "__\n"
        kept = bytearray()
        window = bytearray()  # the recent output, where the marker is looked for
        dropped = 0
        while True:
            chunk = await self.process.stdout.read(65536)
            window += chunk
            at = window.find(marker)
            end = window.find(b"__\n", at + len(marker)) if at >= 0 else -1
            if end >= 0:
                status = window[at + len(marker) : end].decode(errors="replace")
                self.last_exit_code = int(status) if status.isdigit() else None
                safe = at
            elif not chunk:  # the shell exited (``exit`` in the command): reopened next time
                await self.process.wait()
                self.last_exit_code = self.process.returncode
                safe = len(window)
            else:  # all but what could be the start of the marker and its status
                safe = max(0, len(window) - len(marker) - 32)
            room = max(0, MAX_OUTPUT_BYTES - len(kept))
            kept += window[: min(safe, room)]
            dropped += max(0, safe - room)
            del window[:safe]
            if end >= 0 or not chunk:
                text = bytes(kept).decode("utf-8", errors="replace")
                if dropped:
                    text += f"\n[... {dropped} more bytes of output dropped]"
                return text.strip()

    async def close(self, *, force: bool = False) -> None:
        """End the shell and everything it started (idempotent)."""
        process = self.process
        if process is None or process.returncode is not None:
            return
        if not force and process.stdin is not None:
            with contextlib.suppress(OSError, RuntimeError):
                process.stdin.write(b"exit\n")
                await process.stdin.drain()
                process.stdin.close()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(process.wait(), 2)
                return
        if self._scope is not None and self.sandbox.guard.cgroup is not None:
            await self._scope.kill()  # the shell and all it started, inside and the relay
        else:  # a remote engine: the relay forwards SIGTERM (then SIGKILL) to the shell's group
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), 3)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()


class AsyncDockerizedTerminal:
    """Upstream's terminal: ``await init()``, ``await run_command(cmd, timeout)``, ``close()``."""

    def __init__(
        self,
        container: Any,
        working_dir: str = "/workspace",
        env_vars: dict[str, str] | None = None,
        default_timeout: int = 60,
        *,
        sandbox: DockerBackend | None = None,
    ) -> None:
        if sandbox is None:
            if isinstance(container, str):
                container = docker_client().containers.get(container)
            sandbox = DockerBackend.attach(container)
        self.sandbox = sandbox
        self.client: Any = sandbox.client
        self.container: Any = sandbox.container
        self.working_dir = working_dir
        self.env_vars = dict(env_vars or {})
        self.default_timeout = default_timeout
        self.session: DockerSession | None = None

    async def init(self) -> None:
        """Create the working directory (if missing) and open the session."""
        made = await asyncio.to_thread(
            self.container.exec_run, ["mkdir", "-p", self.working_dir], user=self.sandbox.user
        )
        if made.exit_code:
            output = made.output.decode("utf-8", errors="replace")
            raise SandboxError(f"Failed to create working directory {self.working_dir}: {output}")
        self.session = DockerSession(self.container.id, sandbox=self.sandbox)
        await self.session.create(self.working_dir, self.env_vars)

    async def run_command(self, cmd: str, timeout: float | None = None) -> str:
        """Output of ``cmd`` in the session; TimeoutError after ``timeout`` (default
        ``default_timeout``) seconds. A session ended by a timeout or ``exit`` is reopened."""
        if self.session is None:
            raise SandboxError("Terminal not initialized")
        if not self.session.alive:
            await self.session.create(self.working_dir, self.env_vars)
        return await self.session.execute(cmd, timeout=timeout or self.default_timeout)

    @property
    def last_exit_code(self) -> int | None:
        """Exit status of the last command (None if unknown)."""
        return self.session.last_exit_code if self.session is not None else None

    async def close(self) -> None:
        if self.session is not None:
            await self.session.close()

    async def __aenter__(self) -> AsyncDockerizedTerminal:
        await self.init()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
