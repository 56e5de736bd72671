"""The sandbox contract: a backend turns "run this program in the workspace" into a host command
(``command``), says which processes belong to a run (``scope``), maps paths, and releases
what it holds (``cleanup``); the tools keep their own I/O so every backend gets the same
bounded output, timeouts and process cleanup (docs/sandbox.md)."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import math
import os
import shutil
import signal
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Literal

from app.config import SandboxSettings
from app.sandbox import hostside
from app.sandbox.environment import register_environment_secrets, scrub_environment
from app.sandbox.files import FileAccessPolicy, resolve_workspace
from app.sandbox.guard import ProcessGuard
from app.sandbox.launcher import LaunchOptions
from app.sandbox.processes import (
    OutputBuffer,
    PipeProtocol,
    ProcessScope,
    finish_run,
    format_seconds,
)
from app.utils.sizes import parse_size

#: Pauses between starts that failed with EAGAIN (see ``Sandbox.start``).
_BUSY_PAUSES = (0.25, 0.5, 1.0, 2.0)

#: Workspace entries sandboxed code never sees nor gets handed: the agent's session files
#: (``app.session.store`` keeps them in ``<workspace>/.sessions``).
PRIVATE_ENTRIES = (".sessions",)

_FILE_SIZE_LIMIT = 1024**3
_MAX_OUTPUT = 100_000  # characters of each stream a one-shot run returns


@dataclass(frozen=True)
class SandboxLimits:
    """What one run may use. Memory and CPU are per process (rlimits) on local/bubblewrap."""

    memory_bytes: int | None
    cpu_limit: float
    timeout: float
    max_processes: int | None
    file_size_bytes: int | None = _FILE_SIZE_LIMIT

    @classmethod
    def from_settings(cls, settings: SandboxSettings) -> SandboxLimits:
        return cls(
            memory_bytes=parse_size(settings.memory_limit),
            cpu_limit=settings.cpu_limit,
            timeout=float(settings.timeout),
            max_processes=settings.max_processes,
        )

    def rlimits(self, wall_seconds: float) -> dict[str, int]:
        """``RLIMIT_*`` values for one run (CPU: cpu_limit CPUs' worth). RLIMIT_DATA rather
        than RLIMIT_AS: runtimes that reserve large address ranges (JVM, Node) still start."""
        cpu = max(1, math.ceil(self.cpu_limit * wall_seconds)) + 1
        limits = {"RLIMIT_CORE": 0, "RLIMIT_CPU": cpu}
        if self.memory_bytes is not None:
            limits["RLIMIT_DATA"] = self.memory_bytes
        if self.file_size_bytes is not None:
            limits["RLIMIT_FSIZE"] = self.file_size_bytes
        return limits


@dataclass(frozen=True)
class LaunchSpec:
    """A host command ready for ``subprocess_exec``: argv, environment, working directory."""

    argv: list[str]
    env: dict[str, str]
    cwd: str


@dataclass
class ExecResult:
    """Outcome of :meth:`Sandbox.run`. ``exit_code`` is negative for a signal, None if stopped."""

    exit_code: int | None
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


class Sandbox(ABC):
    """One backend instance per agent; tools share it. Safe to clean up more than once."""

    backend: ClassVar[str] = "abstract"
    #: Whether a signal death comes back as ``128 + N`` (bwrap's init, docker exec between).
    signal_as_status: ClassVar[bool] = False

    def __init__(
        self,
        settings: SandboxSettings | None = None,
        workspace: str | os.PathLike[str] | None = None,
    ) -> None:
        self.settings = settings if settings is not None else SandboxSettings()
        self.limits = SandboxLimits.from_settings(self.settings)
        self._workspace_arg = workspace
        self._workspace: Path | None = None
        self._started = False
        self._lock: asyncio.Lock | None = None
        self._lock_loop: asyncio.AbstractEventLoop | None = None
        self.guard = ProcessGuard(self.limits.max_processes)
        register_environment_secrets()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} workspace={self._workspace_arg!s} started={self._started}>"

    @property
    def started(self) -> bool:
        return self._started

    def _get_lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock_loop is not loop:
            self._lock, self._lock_loop = asyncio.Lock(), loop
        return self._lock

    async def start(self) -> None:
        """Get ready to run commands (idempotent); raises SandboxUnavailableError if it can't."""
        if self._started:
            return
        async with self._get_lock():
            if self._started:
                return
            for pause in (*_BUSY_PAUSES, None):
                try:
                    await self._start_once()
                    break
                except OSError as exc:
                    # EAGAIN: the machine is out of processes for a moment (another run's
                    # fork bomb being killed); a start a little later usually works.
                    if exc.errno != errno.EAGAIN or pause is None:
                        raise
                    await asyncio.sleep(pause)
            self._started = True

    async def _start_once(self) -> None:
        await asyncio.to_thread(self.guard.open)
        try:
            await self._start()
        except BaseException:
            await self.guard.close()
            raise

    async def cleanup(self) -> None:
        """Release everything the backend holds; it starts again on the next command."""
        if not self._started:
            return
        async with self._get_lock():
            if self._started:
                self._started = False
                try:
                    await self.guard.close()
                finally:
                    await self._cleanup()

    async def _start(self) -> None:
        return None

    async def _cleanup(self) -> None:
        return None

    @property
    def workspace(self) -> Path:
        """The workspace on the host (created if missing)."""
        if self._workspace is None:
            self._workspace = resolve_workspace(self._workspace_arg)
        return self._workspace

    @property
    def workdir(self) -> str:
        """The workspace as code inside the sandbox sees it."""
        return str(self.workspace)

    @property
    def python(self) -> str:
        """The interpreter that runs ``python_execute`` code inside the sandbox (the agent's,
        by a path with no ``..``: a relative start leaves one in ``sys.executable``)."""
        return hostside.python()

    @property
    def shell(self) -> str:
        """bash inside the sandbox."""
        return shutil.which("bash") or "/bin/bash"

    def to_host_path(self, path: str) -> str:
        """A path the model wrote (as the sandbox sees it) as a host path."""
        return path

    def to_sandbox_path(self, text: str) -> str:
        """Host workspace paths in ``text`` rewritten the way the sandbox sees them."""
        return text

    def policy(self, allowed_paths: tuple[Path, ...] | list[Path] = ()) -> FileAccessPolicy:
        """The editor's file access: the workspace (and extra roots), creating as ``file_owner``."""
        return FileAccessPolicy.create(self.workspace, allowed_paths, owner=self.file_owner)

    @property
    def file_owner(self) -> tuple[int, int] | None:
        """(uid, gid) the agent's new files need for sandboxed code to use them (None: ours)."""
        return None

    def environment(self) -> dict[str, str]:
        """The environment of model-run code: the agent's own without credentials."""
        env = scrub_environment()
        env.setdefault("MPLBACKEND", "Agg")
        return env

    def command(
        self,
        argv: list[str],
        *,
        rlimits: dict[str, int] | None = None,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
    ) -> LaunchSpec:
        """The host command that runs ``argv`` in the sandbox (``cwd`` as seen inside); ``env``
        (default :meth:`environment`) is scrubbed of credentials again, whatever was passed."""
        clean = scrub_environment(env if env is not None else self.environment())
        return self._wrap(list(argv), rlimits or {}, clean, cwd or self.workdir)

    @abstractmethod
    def _wrap(
        self, argv: list[str], rlimits: dict[str, int], env: dict[str, str], cwd: str
    ) -> LaunchSpec: ...

    def scope(self, leader: int) -> ProcessScope:
        """The processes of a run (leader: its host pid), from now on under the process limit."""
        scope = self._scope(leader)
        self.guard.track(scope)
        return scope

    def _scope(self, leader: int) -> ProcessScope:
        return ProcessScope(leader)

    def launch_options(self, rlimits: dict[str, int]) -> LaunchOptions:
        """What the launcher does before ``exec``: rlimits, and joining the sandbox's cgroup."""
        return LaunchOptions(rlimits=dict(rlimits), cgroup=self.guard.cgroup_procs)

    def process_count(self) -> int:
        """Live processes of this sandbox right now (all runs, background jobs included)."""
        return self.guard.current()

    def exit_status(self, returncode: int | None) -> int | None:
        """The program's exit status in asyncio's convention (negative = killed by signal)."""
        if self.signal_as_status and returncode is not None and 128 < returncode < 128 + 65:
            with contextlib.suppress(ValueError):
                return -signal.Signals(returncode - 128).value
        return returncode

    async def run(self, command: str, *, timeout: float | None = None) -> ExecResult:
        """Run a shell command once (``bash -c``) with the sandbox's limits; output bounded."""
        return await self._run_once([self.shell, "--noprofile", "--norc", "-c", command], timeout)

    async def run_python(self, code: str, *, timeout: float | None = None) -> ExecResult:
        """Run Python code once (``python -c``) with the sandbox's limits; output bounded."""
        return await self._run_once([self.python, "-c", code], timeout)

    async def _run_once(self, argv: list[str], timeout: float | None) -> ExecResult:
        await self.start()
        seconds = timeout or self.limits.timeout
        spec = self.command(argv, rlimits=self.limits.rlimits(seconds))
        limit = self.limits.max_processes
        run = await run_bounded(
            self, spec, timeout=seconds, max_output=_MAX_OUTPUT, max_processes=limit
        )
        notes = {
            "timeout": [f"timed out after {format_seconds(seconds)} seconds"],
            "processes": [f"stopped: reached the limit of {limit} processes"],
            None: [],
        }[run.stopped]
        return ExecResult(
            exit_code=None if run.stopped else run.returncode,
            stdout=run.stdout.render(_MAX_OUTPUT),
            stderr=run.stderr.render(_MAX_OUTPUT),
            timed_out=run.stopped == "timeout",
            notes=notes,
        )

    async def read_file(self, path: str) -> bytes:
        """Bytes of a workspace file (a path as the sandbox sees it), read confined."""
        target = self.policy().locate(self.to_host_path(path))
        return await asyncio.to_thread(target.read_bytes)

    async def write_file(self, path: str, data: bytes) -> None:
        """Write a workspace file (parents created) through the one confined writer."""
        target = self.policy().locate(self.to_host_path(path))
        await asyncio.to_thread(target.write_atomic, data, make_parents=True)


@dataclass
class BoundedRun:
    """What a run left: its output, exit status (negative: a signal) and why it was stopped."""

    stdout: OutputBuffer
    stderr: OutputBuffer
    returncode: int | None
    stopped: Literal["timeout", "processes"] | None


async def run_bounded(
    sandbox: Sandbox,
    spec: LaunchSpec,
    *,
    timeout: float,
    max_output: int,
    max_processes: int | None,
    stdin: bytes | None = None,
    interval: float = 0.05,
    grace: float = 1.0,
) -> BoundedRun:
    """Run ``spec`` (from ``sandbox.command``) with ``stdin`` (else none); raises ``OSError``
    when it cannot start. Cancelled, the run is killed before the cancellation goes on."""
    stdout = OutputBuffer(max_output, max_output // 4)
    stderr = OutputBuffer(max_output, max_output // 4)
    refused = sandbox.guard.refused()
    transport, protocol = await asyncio.get_running_loop().subprocess_exec(
        lambda: PipeProtocol({1: stdout.feed, 2: stderr.feed}),
        *spec.argv,
        stdin=asyncio.subprocess.DEVNULL if stdin is None else asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=spec.cwd,
        env=spec.env,
        start_new_session=True,
    )
    scope = sandbox.scope(transport.get_pid())
    pipe = transport.get_pipe_transport(0)
    if stdin is not None and isinstance(pipe, asyncio.WriteTransport):
        pipe.write(stdin)
        pipe.close()  # flushes, then closes: the program reads up to EOF
    exited = asyncio.ensure_future(protocol.exited.wait())
    watchdog = (
        asyncio.ensure_future(scope.watch_size(max_processes, interval)) if max_processes else None
    )
    stopped: Literal["timeout", "processes"] | None = None
    try:
        waiting = {exited} if watchdog is None else {exited, watchdog}
        done, _ = await asyncio.wait(waiting, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if exited not in done:
            if watchdog is not None and watchdog in done:
                stopped = "processes"
                await scope.kill()
            else:
                stopped = "timeout"
                await scope.terminate(protocol.exited, grace=grace)
        elif max_processes and sandbox.guard.refused() == refused:
            # The program may have spawned its crowd and exited between two watchdog polls.
            members = await asyncio.to_thread(scope.members)
            if members is not None and len(members) >= max_processes:
                stopped = "processes"
    except BaseException:
        scope.signal(signal.SIGKILL)  # cancelled (or something broke): nothing may survive us
        raise
    finally:
        await asyncio.shield(finish_run(scope, protocol, transport))
        for task in (exited, watchdog):
            if task is not None:
                task.cancel()
    if stopped is None and sandbox.guard.refused() > refused:
        stopped = "processes"  # the kernel refused a fork: the limit was reached
    stdout.close()
    stderr.close()
    return BoundedRun(stdout, stderr, sandbox.exit_status(transport.get_returncode()), stopped)
