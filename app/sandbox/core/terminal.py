"""Upstream compatibility: the interactive Docker terminal, one ``bash`` session in a container
(through :mod:`app.sandbox.docker_relay`). Each command ends with a random marker carrying its
exit status (no prompt parsing), output is bounded, and a command over its timeout is killed
with all it started (the session reopens on the next command)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import secrets
import signal
import sys
from typing import Any

from app.exceptions import SandboxError
from app.sandbox.docker import RUN_MARKER, ContainerGuard, ContainerScope

__all__ = ["AsyncDockerizedTerminal", "DockerSession"]

#: Output kept per command (the rest is dropped, with a note saying how much).
MAX_OUTPUT_BYTES = 1024 * 1024
_SHELL = ["bash", "--noprofile", "--norc"]


class DockerSession:
    """One ``bash`` running in a container, fed commands over its stdin."""

    def __init__(
        self, container_id: str, *, user: str | None = None, init_pid: int | None = None
    ) -> None:
        self.container_id = container_id
        self.user = user
        self.process: asyncio.subprocess.Process | None = None
        self.last_exit_code: int | None = None
        # The container's pids cgroup (its init's, seen from this host): finds every process
        # of the session, background jobs and setsid included, to kill them on a timeout.
        self._guard = ContainerGuard(None)
        self._guard.attach(init_pid)
        self._scope: ContainerScope | None = None

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.returncode is None

    async def create(self, working_dir: str, env_vars: dict[str, str]) -> None:
        """Start the shell in ``working_dir`` with ``env_vars`` (plus a dumb terminal)."""
        token = secrets.token_hex(8)
        env = {**env_vars, "TERM": "dumb", "PS1": "", "PS2": "", "PROMPT_COMMAND": ""}
        env[RUN_MARKER] = token
        options = json.dumps({"cwd": working_dir, "env": env, "user": self.user or ""})
        relay = [sys.executable, "-m", "app.sandbox.docker_relay", self.container_id, options]
        self.process = await asyncio.create_subprocess_exec(
            *relay,
            "--",
            *_SHELL,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        self._scope = ContainerScope(self.process.pid, self._guard, token)

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
        if self._scope is not None and self._guard.cgroup is not None:
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
        user: str | None = None,
    ) -> None:
        if isinstance(container, str):
            from app.sandbox.docker import docker_client

            self.client: Any = docker_client()
            self.container: Any = self.client.containers.get(container)
        else:
            self.client = getattr(container, "client", None)
            self.container = container
        self.working_dir = working_dir
        self.env_vars = dict(env_vars or {})
        self.default_timeout = default_timeout
        self.user = user
        self.session: DockerSession | None = None

    async def init(self) -> None:
        """Create the working directory (if missing) and open the session."""
        made = await asyncio.to_thread(
            self.container.exec_run, ["mkdir", "-p", self.working_dir], user=self.user or ""
        )
        if made.exit_code:
            output = made.output.decode("utf-8", errors="replace")
            raise SandboxError(f"Failed to create working directory {self.working_dir}: {output}")
        init_pid: int | None = None
        with contextlib.suppress(Exception):  # a remote engine: no host pid to find
            await asyncio.to_thread(self.container.reload)
            init_pid = int(self.container.attrs["State"]["Pid"]) or None
        self.session = DockerSession(self.container.id, user=self.user, init_pid=init_pid)
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
