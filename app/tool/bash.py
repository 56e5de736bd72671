"""``bash``: one persistent shell per tool instance, so ``cd`` and ``export`` carry over.

How commands run, are interrupted and end (markers, SIGINT, ``< /dev/null``): docs/tools.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import secrets
import shlex
import signal
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field, PrivateAttr

from app.exceptions import SandboxError
from app.sandbox.environment import scrub_environment
from app.sandbox.factory import create_sandbox, describe_start_error
from app.sandbox.processes import (
    OutputBuffer,
    PipeProtocol,
    ProcessScope,
    any_running,
    compose_streams,
    describe_returncode,
    finish_run,
    format_seconds,
    in_thread,
    signal_group,
)
from app.tool.base import BaseTool, CLIResult, ToolFailure, ToolResult
from app.tool.declared import ToolArgs

if TYPE_CHECKING:
    from app.sandbox.base import Sandbox
    from app.sandbox.guard import ProcessGuard

# The shell writes its markers to copies of the original stdout/stderr, so a command that
# redirects the shell's own output (``exec > log``) does not hide the end of the command.
_MARK_OUT_FD = 250
_MARK_ERR_FD = 251
_MARKER_SEARCH_TAIL = 128  # bytes kept back so a marker split across reads is still found
_RESTART_NOTE = "so the working directory and environment variables were reset"
#: How often a session checks its sandbox's process limit: while a command runs, and between.
_BUSY_POLL = 0.05
_IDLE_POLL = 0.2
#: After a command that left background processes, how long to watch whether they multiply
#: up to the process limit (a fork bomb ``:(){ :|:& };:`` returns at once), so that its own
#: result says so; the watch ends as soon as their number holds still with none running.
_SETTLE = 3.0
_STEADY = 0.5
#: Longest wait for a killed bomb's processes to be gone before the next shell starts.
_REAP_WAIT = 10.0

_DESCRIPTION = (
    "Run a command in a persistent bash shell (the working directory starts at the "
    "workspace). State carries over between calls: cd, exported variables and shell "
    "functions stay. Commands get no input (stdin is empty), so never start programs that "
    "wait for a user: pass options such as -y, or feed input through files or heredocs. "
    "Long-running servers belong in the background (`cmd > out.log 2>&1 &`); a command still "
    "running after the timeout is interrupted like Ctrl+C. stdout and stderr are both "
    "returned (stderr under a [stderr] label) with the exit code when it is not 0; very long "
    "output is truncated, so filter it (grep, head, tail). Set `restart` to true to get a "
    "fresh shell."
)


def _marker(token: str, kind: str) -> re.Pattern[bytes]:
    return re.compile(rb"\n?__OM_" + token.encode() + rb"_" + kind.encode() + rb"_(-?\d+)__\n")


def _print_marker(token: str, kind: str, status: str, err_status: str | None = None) -> str:
    # The marker is assembled by printf from two pieces, so the text of this line (which
    # `set -v` or `set -x` may echo) never contains the marker itself. The one on stderr may
    # carry another number (the last background job's pid, see ``_run``).
    fmt = "'\\n%s%s_%s__\\n'"
    return (
        f"printf {fmt} '__OM' '_{token}_{kind}' {status} >&{_MARK_OUT_FD}; "
        f"printf {fmt} '__OM' '_{token}_{kind}' {err_status or status} >&{_MARK_ERR_FD}"
    )


class _StreamWatcher:
    """One output stream of the shell: collects a command's output and spots its marker."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._buffer = self._new_buffer()
        self._finished: OutputBuffer | None = None
        self._pending = b""
        self._pattern: re.Pattern[bytes] | None = None
        self.status: int | None = None
        self.found = asyncio.Event()

    def _new_buffer(self) -> OutputBuffer:
        return OutputBuffer(self._limit, self._limit // 4)

    def expect(self, pattern: re.Pattern[bytes]) -> None:
        """Watch for ``pattern``; output keeps accumulating in the same buffer."""
        if self._finished is not None:
            # The previous marker already arrived (a race with an interrupt): keep one buffer
            # for the whole command, followed by whatever came after that marker.
            stray = self._buffer
            stray.close()
            self._buffer, self._finished = self._finished, None
            self._buffer.add_text(stray.render(self._limit))
        self._pattern = pattern
        self.status = None
        self.found.clear()

    def feed(self, data: bytes) -> None:
        if self._pattern is None:
            self._buffer.feed(data)
            return
        data = self._pending + data
        match = self._pattern.search(data)
        if match is None:
            if len(data) > _MARKER_SEARCH_TAIL:
                self._buffer.feed(data[:-_MARKER_SEARCH_TAIL])
                data = data[-_MARKER_SEARCH_TAIL:]
            self._pending = data
            return
        self._buffer.feed(data[: match.start()])
        self._finished, self._buffer = self._buffer, self._new_buffer()
        self._buffer.feed(data[match.end() :])  # e.g. a background job: shown next time
        self._pending = b""
        self._pattern = None
        self.status = int(match.group(1))
        self.found.set()

    def take(self) -> OutputBuffer:
        """The output of the command that just ended (or was abandoned) and stop watching."""
        if self._finished is not None:
            result, self._finished = self._finished, None
        else:
            self._buffer.feed(self._pending)
            result, self._buffer = self._buffer, self._new_buffer()
        self._pending = b""
        self._pattern = None
        result.close()
        return result


@dataclass(eq=False)
class _Session:
    """A running bash process and the state needed to talk to it."""

    loop: asyncio.AbstractEventLoop
    transport: asyncio.SubprocessTransport
    protocol: PipeProtocol
    stdout: _StreamWatcher
    stderr: _StreamWatcher
    scope: ProcessScope
    closed: bool = False
    #: Processes the session had when its limit watch killed it (None: not killed so).
    over_limit: int | None = None
    limit_hit: asyncio.Event = field(default_factory=asyncio.Event)
    busy: bool = False
    resting: int = 0  # the session's processes after its last command
    last_job: int | None = 0  # the shell's ``$!`` after its last command
    _watcher: asyncio.Task[None] | None = None
    _guard: ProcessGuard | None = None
    _pressure: tuple[int, int] = (0, 0)  # the guard's pressure when the command started

    def __post_init__(self) -> None:
        self.pgid = self.transport.get_pid()
        # Last resort if the tool is dropped without cleanup(): no shell outlives the program.
        self._finalizer = weakref.finalize(self, signal_group, self.pgid, signal.SIGKILL)

    @property
    def alive(self) -> bool:
        return not self.closed and not self.protocol.exited.is_set()

    def send(self, line: str) -> None:
        pipe = self.transport.get_pipe_transport(0)
        if not isinstance(pipe, asyncio.WriteTransport) or pipe.is_closing():
            raise ConnectionResetError("the shell's input is closed")
        try:
            data = line.encode("utf-8", "surrogateescape")  # file names decoded by Python
        except UnicodeEncodeError:
            data = line.encode("utf-8", "replace")
        pipe.write(data)

    async def wait_for_markers(self, timeout: float | None, *, limit: bool = False) -> str:
        """ "done" when both markers arrived, "exited" if the shell died, "processes" if
        (``limit``) the limit watch fired first, else "timeout"."""
        waits = [self._both_found(), self.protocol.exited.wait()]
        if limit:
            waits.append(self.limit_hit.wait())
        tasks = [asyncio.ensure_future(wait) for wait in waits]
        try:
            await asyncio.wait(tasks, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
        if self.stdout.found.is_set() and self.stderr.found.is_set():
            return "done"
        if self.protocol.exited.is_set():
            return "exited"
        return "processes" if limit and self.limit_hit.is_set() else "timeout"

    async def _both_found(self) -> None:
        await self.stdout.found.wait()
        await self.stderr.found.wait()

    def watch_limit(self, guard: ProcessGuard, limit: int) -> None:
        """Watch the sandbox's process limit for as long as the session lives."""
        self._guard = guard
        watch = _watch_limit(weakref.ref(self), weakref.ref(guard), limit)
        self._watcher = self.loop.create_task(watch)

    async def stop_for_limit(self, guard: ProcessGuard, count: int) -> None:
        """Kill the session for the limit (see ``_watch_limit``), then wait for room."""
        self.over_limit = count
        self.limit_hit.set()
        # A bomb's processes take a while to go on a busy machine: the next command's shell
        # must not start beside them (the watchdog would count them).
        await self.scope.kill(deadline=_REAP_WAIT)
        loop = asyncio.get_running_loop()
        # The killed processes count against the limit until they are reaped: wait for room,
        # so the next command's shell can fork (or start the sandbox's cgroup afresh).
        give_up = loop.time() + 1.0
        while not await in_thread(guard.has_room):
            if loop.time() >= give_up:
                await in_thread(guard.make_room)
                break
            await asyncio.sleep(_BUSY_POLL)

    async def begin(self) -> None:
        """A command starts: remember the limit's state, to tell whether it was hit since."""
        self.busy = True
        if self._guard is not None:
            self._pressure = await in_thread(self._guard.pressure)

    async def pressure_changed(self) -> bool:
        """Whether the limit was hit (a fork refused, a kill for it) since the command began."""
        guard = self._guard
        return guard is not None and await in_thread(guard.pressure) != self._pressure

    async def settle(self, last_job: int | None) -> bool:
        """After a command: True if processes it left in the background multiply up to the
        limit (see ``_SETTLE``); False once their number holds still, none of them is
        running (a loaded machine stalls a bomb too) and no fork was refused meanwhile.
        ``last_job`` is the shell's ``$!``: a new one means the command started a background
        job (a bomb's first generation may be gone already)."""
        count = await in_thread(self.scope.members)
        if count is None or self._guard is None:
            return False
        started, self.last_job = last_job != self.last_job, last_job
        loop = asyncio.get_running_loop()
        give_up = loop.time() + _SETTLE
        last, steady_since = len(count), loop.time()
        while (started or last > self.resting) and loop.time() < give_up:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.limit_hit.wait(), _BUSY_POLL)
            if self.limit_hit.is_set():
                return True
            members = await in_thread(self.scope.members) or []
            now = len(members)
            if now != last or await in_thread(any_running, members):
                steady_since = loop.time()  # a busy process may be a bomb the CPU holds back
            last = now
            if loop.time() - steady_since >= _STEADY and not await self.pressure_changed():
                break  # a server or a few jobs in the background: fine
        self.resting = last
        if not self.limit_hit.is_set() and await self.pressure_changed():
            # The limit was hit (the watchdog may have killed us already): whose fault was it?
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.limit_hit.wait(), 3 * _IDLE_POLL)
        return self.limit_hit.is_set()

    async def close(self) -> None:
        """Kill the shell and everything it started; safe to call more than once."""
        if self.closed:
            return
        self.closed = True
        self._finalizer.detach()
        watcher, self._watcher = self._watcher, None
        if watcher is not None and watcher is not asyncio.current_task():
            if self.limit_hit.is_set():  # let it finish waiting for room
                with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                    await asyncio.wait_for(asyncio.shield(watcher), _REAP_WAIT + 2.0)
            watcher.cancel()
        if self.limit_hit.is_set():
            await self.scope.kill(deadline=_REAP_WAIT)
        await finish_run(self.scope, self.protocol, self.transport)

    def abandon(self) -> None:
        """Kill without awaiting: for a session that belongs to another (maybe closed) loop."""
        if self.closed:
            return
        self.closed = True
        self._finalizer()  # kills the shell's group, now
        watcher, self._watcher = self._watcher, None
        if watcher is not None:  # it belongs to the other loop, maybe closed already
            try:
                watcher.get_loop().call_soon_threadsafe(watcher.cancel)
            except RuntimeError:  # closed: the task never runs again, and must not complain
                with contextlib.suppress(AttributeError):
                    watcher._log_destroy_pending = False  # type: ignore[attr-defined]
        with contextlib.suppress(Exception):
            self.transport.close()


async def _watch_limit(
    session_ref: weakref.ref[_Session], guard_ref: weakref.ref[ProcessGuard], limit: int
) -> None:
    """Kill the shell and everything it started once the sandbox hits its process limit
    because of them, during a command or between two: a fork bomb left running would make
    every later command of the sandbox fail to fork. The limit was hit when the cgroup
    refused a fork (the session then holds most of the sandbox's processes: another tool's
    run may be the culprit), when the watchdog (no cgroup) killed every run for it, or when
    a command has ``limit`` processes of its own (docker's container). Holds the session and
    the guard weakly between polls, so a tool dropped without cleanup is still collected
    (and its shell killed, its cgroup removed)."""
    try:
        guard = guard_ref()
        if guard is None:
            return
        seen = await in_thread(guard.pressure)
        del guard
        while True:
            session = session_ref()
            if session is None or session.closed:  # a shell killed between commands counts
                return
            pause = _BUSY_POLL if session.busy else _IDLE_POLL
            del session
            await asyncio.sleep(pause)
            session, guard = session_ref(), guard_ref()
            if session is None or guard is None or session.closed:
                return
            now = await in_thread(guard.pressure)
            if now != seen or session.busy:
                mine = await in_thread(session.scope.members) or []
                count = 0
                if now != seen:
                    killed, seen = now[1] != seen[1], now
                    total = await in_thread(guard.current)
                    if killed or len(mine) * 2 > total:
                        count = max(len(mine), 1)
                if session.busy and len(mine) >= limit:
                    count = len(mine)
                if count:
                    await session.stop_for_limit(guard, count)
                    return
            del session, guard
    except RuntimeError:  # no executor any more (interpreter shutting down)
        return


class BashArgs(ToolArgs):
    command: str = Field(
        description="The shell command to run; several lines or `&&` chains are fine."
    )
    restart: bool | None = Field(
        None,
        description="Kill the current shell and start a fresh one (in the workspace) "
        "before running `command`, which may then be empty.",
    )


class Bash(BaseTool):
    """A persistent bash session for the model (upstream name and schema)."""

    name: str = "bash"
    description: str = _DESCRIPTION
    Args: ClassVar[type[ToolArgs]] = BashArgs

    workspace: Path | None = Field(
        default=None, description="Starting directory; None means config.workspace_root."
    )
    timeout: float = Field(default=120.0, gt=0, description="Seconds a command may run.")
    interrupt_grace: float = Field(
        default=3.0, gt=0, description="How long the shell may take to recover from SIGINT."
    )
    startup_timeout: float = Field(default=10.0, gt=0)
    max_output_chars: int = Field(default=10_000, ge=200)
    sandbox: Any = Field(
        default=None,
        description="The app.sandbox.Sandbox the shell runs in (its limits apply); None = one "
        "from app.sandbox.factory for `workspace` (the configured [sandbox] backend).",
    )

    _session: _Session | None = PrivateAttr(default=None)
    _notice: str | None = PrivateAttr(default=None)  # for the next result
    _lock: asyncio.Lock | None = PrivateAttr(default=None)
    _lock_loop: asyncio.AbstractEventLoop | None = PrivateAttr(default=None)

    async def execute(
        self,
        command: str | None = None,
        restart: bool = False,
        timeout: float | None = None,
        **_: Any,
    ) -> ToolResult:
        """Run ``command`` (``timeout`` is for programmatic callers; not in the schema)."""
        if command is not None and not isinstance(command, str):
            return ToolFailure(error="`command` must be a string.")
        command = (command or "").replace("\x00", "")
        if isinstance(restart, str):  # models sometimes send "true"/"false" as strings
            restart = restart.strip().lower() == "true"
        if not restart and not command.strip():
            return ToolFailure(
                error="No command given: `command` must be a non-empty shell command."
            )
        async with self._get_lock():
            if restart:
                await self._stop_session()
                if not command.strip():
                    try:
                        await self._ensure_session()
                    except _StartError as exc:
                        return ToolFailure(error=str(exc))
                    return CLIResult(
                        output="The bash session was restarted: a fresh shell in the workspace."
                    )
            try:
                session = await self._ensure_session()
            except _StartError as exc:
                return ToolFailure(error=str(exc))
            result = await self._run(session, command, self._command_timeout(timeout))
            notice, self._notice = self._notice, None
            if notice is None:
                return result
            if result.error:
                return result.replace(error=f"{notice}\n{result.error}")
            return result.replace(output=f"{notice}\n{result.output}" if result.output else notice)

    def box(self) -> Sandbox:
        """The sandbox commands run in: the one given, else one from the factory (built on
        first use, so a tool can be made before the configuration is loaded)."""
        if self.sandbox is None:
            self.sandbox = create_sandbox(workspace=self.workspace)
        return self.sandbox

    def _command_timeout(self, requested: float | None) -> float:
        return min(requested or self.timeout, self.box().limits.timeout)

    def _process_limit(self) -> int | None:
        return self.box().limits.max_processes

    async def cleanup(self) -> None:
        """Kill the shell and its children (and release the sandbox); the next call starts
        afresh."""
        await self._stop_session()
        if self.sandbox is not None:
            await self.sandbox.cleanup()

    @property
    def session_pid(self) -> int | None:
        """Process id (and process group id) of the live shell, if any."""
        session = self._session
        return session.pgid if session is not None and session.alive else None

    # --- session management ----------------------------------------------------------------

    def _get_lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock_loop is not loop:
            self._lock = asyncio.Lock()
            self._lock_loop = loop
        return self._lock

    async def _stop_session(self) -> None:
        session, self._session = self._session, None
        if session is None:
            return
        if session.loop is asyncio.get_running_loop():
            await session.close()
        else:
            session.abandon()

    async def _ensure_session(self) -> _Session:
        session = self._session
        if session is not None and session.alive and session.loop is asyncio.get_running_loop():
            return session
        if session is not None and session.over_limit is not None:
            self._notice = (
                "[the previous shell was killed after its last command: the processes it left "
                f"in the background reached the sandbox's limit of {self._process_limit()} "
                "processes at once (a fork bomb?). This command ran in a new shell, "
                f"{_RESTART_NOTE}]"
            )
        await self._stop_session()
        self._session = await self._start_session()
        return self._session

    def _environment(self) -> dict[str, str]:
        env = {
            k: v
            for k, v in scrub_environment().items()
            if k not in ("PROMPT_COMMAND", "BASH_ENV", "ENV", "MAILCHECK")
        }
        # No terminal here: no prompts, no pagers, no colours; no history loaded nor saved.
        env.update(PS1="", PS2="", PS0="", TERM="dumb", PAGER="cat", GIT_PAGER="cat", HISTFILE="")
        return env

    async def _start_session(self) -> _Session:
        try:
            sandbox = self.box()
            await sandbox.start()
        except OSError as exc:
            problem = describe_start_error(exc)
            raise _StartError(problem[0].upper() + problem[1:]) from exc
        except SandboxError as exc:
            raise _StartError(f"The sandbox is not available: {exc}") from exc
        stdout = _StreamWatcher(self.max_output_chars)
        stderr = _StreamWatcher(self.max_output_chars)
        loop = asyncio.get_running_loop()
        shell = sandbox.shell
        spec = sandbox.command(
            [shell, "--noediting", "--noprofile", "--norc", "-i"],
            rlimits=sandbox.limits.rlimits(sandbox.limits.timeout),
            env=self._environment(),
        )
        try:
            transport, protocol = await loop.subprocess_exec(
                lambda: PipeProtocol({1: stdout.feed, 2: stderr.feed}),
                *spec.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=spec.cwd,
                env=spec.env,
                start_new_session=True,
            )
        except OSError as exc:
            raise _StartError(f"Could not start bash ({shell}): {exc}") from exc
        scope = sandbox.scope(transport.get_pid())
        session = _Session(loop, transport, protocol, stdout, stderr, scope)
        token = secrets.token_hex(8)
        ready = _marker(token, "C")
        stdout.expect(ready)
        stderr.expect(ready)
        setup = (
            "set +H; set +o history; unset HISTFILE; "
            f"exec {_MARK_OUT_FD}>&1 {_MARK_ERR_FD}>&2; "
            '__om_status() { return "$1"; }; ' + _print_marker(token, "C", "0") + "\n"
        )
        try:
            session.send(setup)
            state = await session.wait_for_markers(self.startup_timeout)
        except (ConnectionResetError, asyncio.CancelledError):
            await asyncio.shield(session.close())
            raise
        if state != "done":
            noise = stderr.take().render(500).strip()
            await session.close()
            raise _StartError(
                f"bash did not start properly ({state})" + (f": {noise}" if noise else "")
            )
        stdout.take()  # startup chatter such as "no job control in this shell"
        stderr.take()
        limit = self._process_limit()
        if limit is not None:
            members = await in_thread(scope.members)
            session.resting = len(members or [])
            session.watch_limit(sandbox.guard, limit)
        return session

    # --- running a command -----------------------------------------------------------------

    async def _run(self, session: _Session, command: str, timeout: float) -> ToolResult:
        token = secrets.token_hex(8)
        done = _marker(token, "C")
        session.stdout.expect(done)
        session.stderr.expect(done)
        line = (
            f"eval {shlex.quote(command)} < /dev/null; __om_rc=$?; "
            + _print_marker(token, "C", '"$__om_rc"', '"${!:-0}"')
            + '; __om_status "$__om_rc"\n'
        )
        await session.begin()
        try:
            try:
                session.send(line)
                state = await session.wait_for_markers(timeout, limit=True)
            except ConnectionResetError:
                state = "exited"
            if state == "done" and await session.settle(session.stderr.status):
                state = "processes"
            elif (
                state == "exited"
                and (self.box().exit_status(session.transport.get_returncode()) or 0) < 0
            ):
                # Killed: by the watchdog for the limit? The limit watch tells within a poll;
                # a loaded machine may delay the watch, so the guard's own count decides too.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(session.limit_hit.wait(), 3 * _IDLE_POLL)
                if not session.limit_hit.is_set() and await session.pressure_changed():
                    session.limit_hit.set()
            if state == "processes" or session.limit_hit.is_set():
                await self._drop(session)
                note = (
                    f"The command was stopped: it reached the sandbox's limit of "
                    f"{self._process_limit()} processes at once (a fork bomb, or too many "
                    "processes in the background). The shell and everything it started were "
                    f"killed; the next command starts a new shell, {_RESTART_NOTE}."
                )
                return ToolFailure(error=self._with_output(note, session, token))
            if state == "done":
                return CLIResult(output=self._render(session, token, session.stdout.status))
            if state == "exited":
                return await self._after_exit(session, token)
            return await self._after_timeout(session, token, timeout)
        except asyncio.CancelledError:
            # The command may still be running: start from a clean shell next time.
            await asyncio.shield(self._drop(session))
            raise
        finally:
            session.busy = False

    async def _drop(self, session: _Session) -> None:
        if self._session is session:
            self._session = None
        await session.close()

    async def _after_exit(self, session: _Session, token: str) -> ToolResult:
        await self._drop(session)
        status = describe_returncode(session.transport.get_returncode())
        text = self._render(session, token, None)
        if text.endswith("[stderr]\nexit"):  # what bash -i says when leaving
            text = text[: -len("[stderr]\nexit")].rstrip("\n")
        elif text.endswith("\nexit"):
            text = text[: -len("\nexit")]
        note = (
            f"[the shell exited ({status}); the next command starts a new shell, {_RESTART_NOTE}]"
        )
        return CLIResult(output=f"{text}\n{note}" if text else note)

    async def _after_timeout(self, session: _Session, token: str, timeout: float) -> ToolResult:
        seconds = format_seconds(timeout)
        recovered = _marker(token, "R")
        session.stdout.expect(recovered)
        session.stderr.expect(recovered)
        session.scope.signal(signal.SIGINT)
        try:
            session.send(_print_marker(token, "R", "$?") + "\n")
            state = await session.wait_for_markers(self.interrupt_grace)
        except ConnectionResetError:
            state = "exited"
        if state == "done":
            note = (
                f"The command timed out after {seconds} seconds and was interrupted (SIGINT). "
                "The shell is still running, with its working directory and environment."
            )
        else:
            await self._drop(session)
            note = (
                f"The command timed out after {seconds} seconds and the shell did not recover "
                "from the interrupt: it was killed and the next command starts a new shell, "
                f"{_RESTART_NOTE}."
            )
        return ToolFailure(error=self._with_output(note, session, token))

    def _with_output(self, note: str, session: _Session, token: str) -> str:
        text = self._render(session, token, None)
        return f"{note}\nOutput until then:\n{text}" if text else note

    def _render(self, session: _Session, token: str, status: int | None) -> str:
        out_text, err_text = compose_streams(
            session.stdout.take(), session.stderr.take(), self.max_output_chars
        )
        # A marker can only show up here after a race with an interrupt: never show it.
        leftover = re.compile(r"\n?__OM_" + token + r"_[A-Z]_-?\d+__\n?")
        out_text = leftover.sub("", out_text).rstrip("\n")
        err_text = _clean_stderr(leftover.sub("", err_text), token).strip("\n")
        parts: list[str] = []
        if out_text:
            parts.append(out_text)
        if err_text.strip():
            parts.append("[stderr]\n" + err_text)
        if status:
            parts.append(f"[exit code: {status}]")
        return "\n".join(parts)


_TCSETATTR_NOISE = re.compile(r"bash: \[\d+: \d+ \(\d+\)\] tcsetattr: .*")
_XTRACE = re.compile(r"\++ (.*)")


def _clean_stderr(text: str, token: str) -> str:
    """Drop what the shell says about our own plumbing rather than about the command.

    Without a terminal an interactive bash complains (tcsetattr) after a job dies of a
    signal, and under ``set -x`` it traces the marker commands that follow each command.
    """
    ours = re.compile(r"__om_rc=-?\d+|__om_status -?\d+|printf .*__OM _" + token + r"_[A-Z] \S+")
    kept: list[str] = []
    after_status = False
    for line in text.split("\n"):
        traced = _XTRACE.fullmatch(line)
        if traced is not None:
            body = traced.group(1)
            if ours.fullmatch(body):
                after_status = body.startswith("__om_status")
                continue
            if after_status and re.fullmatch(r"return -?\d+", body):
                after_status = False
                continue
        after_status = False
        if _TCSETATTR_NOISE.fullmatch(line):
            continue
        kept.append(line)
    return "\n".join(kept)


class _StartError(Exception):
    """bash could not be started; the message is meant for the model."""
