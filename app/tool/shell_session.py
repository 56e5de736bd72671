"""The shell behind the ``bash`` tool: one bash process, its output streams read up to a
command's end markers, and its watch on the sandbox's process limit."""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
import weakref
from dataclasses import dataclass, field

from app.sandbox.guard import ProcessGuard
from app.sandbox.processes import (
    OutputBuffer,
    PipeProtocol,
    ProcessScope,
    any_running,
    finish_run,
    in_thread,
    signal_group,
)

# The shell writes its markers to copies of the original stdout/stderr, so a command that
# redirects the shell's own output (``exec > log``) does not hide the end of the command.
MARK_OUT_FD = 250
MARK_ERR_FD = 251
_MARKER_SEARCH_TAIL = 128  # bytes kept back so a marker split across reads is still found
#: How often a session checks its sandbox's process limit: while a command runs, and between.
_BUSY_POLL = 0.05
IDLE_POLL = 0.2
#: How long to watch whether background processes a command left multiply up to the limit (a
#: fork bomb ``:(){ :|:& };:`` returns at once); over once their number holds still, none running.
_SETTLE = 3.0
_STEADY = 0.5
#: Longest wait for a killed bomb's processes to be gone before the next shell starts.
_REAP_WAIT = 10.0


def marker(token: str, kind: str) -> re.Pattern[bytes]:
    return re.compile(rb"\n?__OM_" + token.encode() + rb"_" + kind.encode() + rb"_(-?\d+)__\n")


def print_marker(token: str, kind: str, status: str, err_status: str | None = None) -> str:
    # printf assembles the marker from two pieces, so this line (which `set -v`/`set -x` may echo)
    # never holds it; the one on stderr may carry the last background job's pid (``Bash._run``).
    fmt = "'\\n%s%s_%s__\\n'"
    return (
        f"printf {fmt} '__OM' '_{token}_{kind}' {status} >&{MARK_OUT_FD}; "
        f"printf {fmt} '__OM' '_{token}_{kind}' {err_status or status} >&{MARK_ERR_FD}"
    )


class StreamWatcher:
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
class ShellSession:
    """A running bash process and the state needed to talk to it."""

    loop: asyncio.AbstractEventLoop
    transport: asyncio.SubprocessTransport
    protocol: PipeProtocol
    stdout: StreamWatcher
    stderr: StreamWatcher
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
                await asyncio.wait_for(self.limit_hit.wait(), 3 * IDLE_POLL)
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
    session_ref: weakref.ref[ShellSession], guard_ref: weakref.ref[ProcessGuard], limit: int
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
            pause = _BUSY_POLL if session.busy else IDLE_POLL
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
