"""Upstream compatibility: the interactive Docker terminal, one ``bash`` session in a container,
run by the docker backend (:meth:`~app.sandbox.docker.DockerSandbox.command`). Each command ends
with a random marker carrying its exit status (no prompt parsing), output is bounded, and a
command over its timeout is killed with all it started (the session reopens on the next one).

A session is usable from any event loop, as upstream's was: its pipes live on an event loop of
its own, in a thread (:class:`IOLoop`), so a sandbox made on one loop (a module-scoped pytest
fixture, an application's start-up) can be used from another and closed from a third."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import secrets
import signal
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from app.exceptions import SandboxError
from app.sandbox.docker import DockerSandbox as DockerBackend
from app.sandbox.docker import docker_client
from app.sandbox.processes import ProcessScope

__all__ = ["AsyncDockerizedTerminal", "DockerSession"]

#: Output kept per command (the rest is dropped, with a note saying how much).
MAX_OUTPUT_BYTES = 1024 * 1024
_SHELL = ["bash", "--noprofile", "--norc"]

T = TypeVar("T")


class IOLoop:
    """An event loop running in a daemon thread of its own. Pipes, futures and locks made on
    it stay valid whichever loop the caller runs (each asyncio object belongs to the loop it
    was made on), and whether or not that loop still exists."""

    def __init__(self, name: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:
            # Anything still running is cancelled (its caller gets CancelledError, never a
            # wait without end), then the loop's generators and executor are shut down.
            self._loop.run_until_complete(_cancel_all())
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            self._loop.run_until_complete(self._loop.shutdown_default_executor())
            self._loop.close()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    async def run(self, work: Coroutine[Any, Any, T]) -> T:
        """``work`` run on this loop and awaited on the caller's; cancelling the caller
        cancels it."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(work, self._loop))

    async def stop(self, grace: float = 10.0) -> None:
        """End the loop and its thread, after what it runs (other callers' work) has finished
        or ``grace`` seconds have passed."""
        if self.running:
            with contextlib.suppress(RuntimeError):  # closed meanwhile
                await self.run(_settle(grace))
                self._loop.call_soon_threadsafe(self._loop.stop)
        await asyncio.to_thread(self._thread.join)


async def _settle(grace: float) -> None:
    """Wait (up to ``grace`` seconds) for the loop's other tasks."""
    others = asyncio.all_tasks() - {asyncio.current_task()}
    if others:
        await asyncio.wait(others, timeout=grace)


async def _cancel_all() -> None:
    tasks = asyncio.all_tasks() - {asyncio.current_task()}
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


class DockerSession:
    """One ``bash`` running in a container, fed commands over its stdin (through ``sandbox``,
    by default the docker backend attached to the container as its own user). Its pipes live
    on the session's :class:`IOLoop` (started with the shell, ended by :meth:`close`), so any
    event loop may call it; commands run one at a time."""

    def __init__(self, container_id: str, *, sandbox: DockerBackend | None = None) -> None:
        self.container_id = container_id
        if sandbox is None:
            sandbox = DockerBackend.attach(docker_client().containers.get(container_id))
        self.sandbox = sandbox
        self.process: asyncio.subprocess.Process | None = None
        self.last_exit_code: int | None = None
        self._scope: ProcessScope | None = None
        self._io: IOLoop | None = None
        self._turn = asyncio.Lock()  # first used on the I/O loop, so bound to it
        self._opened_with: tuple[str, dict[str, str]] | None = None  # create()'s arguments
        self._closed_under = False  # close() ended the shell while a command ran

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.returncode is None

    def _io_loop(self) -> IOLoop:
        if self._io is None or not self._io.running:
            self._io = IOLoop(f"docker-terminal-{self.container_id[:12]}")
            self._turn = asyncio.Lock()
        return self._io

    async def create(self, working_dir: str, env_vars: dict[str, str]) -> None:
        """Start the shell in ``working_dir`` with ``env_vars`` (plus a dumb terminal); a shell
        still running from before is ended first."""
        await self._io_loop().run(self._create(working_dir, env_vars))

    async def execute(
        self, command: str, timeout: float | None = None, *, reopen: bool = False
    ) -> str:
        """Run ``command`` in the session; its output (stripped). TimeoutError when it runs
        over ``timeout`` seconds, or a cancelled caller: the command is killed and the shell
        ended. ``reopen``: a shell that has ended is started again as :meth:`create` did."""
        return await self._io_loop().run(self._execute(command, timeout, reopen))

    async def close(self, *, force: bool = False) -> None:
        """End the shell, everything it started and the I/O loop (idempotent)."""
        io, self._io = self._io, None
        if io is None or not io.running:
            return
        try:
            await io.run(self._close(force))
        finally:
            await io.stop()

    # --- on the I/O loop ------------------------------------------------------------------

    async def _create(self, working_dir: str, env_vars: dict[str, str]) -> None:
        async with self._turn:
            await self._end(force=True)
            await self._start(working_dir, env_vars)

    async def _start(self, working_dir: str, env_vars: dict[str, str]) -> None:
        self._opened_with = (working_dir, env_vars)
        self._closed_under = False
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

    async def _execute(self, command: str, timeout: float | None, reopen: bool) -> str:
        async with self._turn:
            if reopen and not self.alive and self._opened_with is not None:
                await self._start(*self._opened_with)
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
                output = await asyncio.wait_for(self._read_result(token), timeout)
            except TimeoutError:
                await self._end(force=True)
                raise TimeoutError(f"Command execution timed out after {timeout} seconds") from None
            except asyncio.CancelledError:  # the caller gave up: the shell is out of step
                await self._end(force=True)
                raise
            if self._closed_under:
                raise SandboxError("the terminal was closed while the command ran")
            return output

    async def _close(self, force: bool) -> None:
        # A command still running (called from another loop) is not waited for.
        self._closed_under = self._turn.locked()
        await self._end(force=force or self._closed_under)

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

    async def _end(self, *, force: bool) -> None:
        """End the shell and everything it started (``force``: without asking it to exit)."""
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
        """Create the working directory (if missing) and open the session (a session opened
        before is closed)."""
        if self.session is not None:
            await self.session.close()
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
        return await self.session.execute(cmd, timeout=timeout or self.default_timeout, reopen=True)

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
