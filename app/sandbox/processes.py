"""Process plumbing for everything a sandbox runs: bounded output, and scopes (a run's
process group, or its PID namespace under bubblewrap) signalled and killed as a whole."""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import signal
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from app.logger import logger

_PROC = Path("/proc")
_T = TypeVar("_T")


async def in_thread(fn: Callable[..., _T], *args: Any) -> _T:
    """``asyncio.to_thread`` for the process watch's reads (a retry may run one twice): while a
    fork bomb has the machine out of processes no worker thread starts, and the watch goes on.
    Raises ``RuntimeError`` only when the executor is shut down (the interpreter is exiting)."""
    while True:
        try:
            return await asyncio.to_thread(fn, *args)
        except RuntimeError as e:
            if "new thread" not in str(e):
                raise
        await asyncio.sleep(0.05)


class OutputBuffer:
    """Text of one output stream, bounded: the first ``head_chars`` and last ``tail_chars``
    are kept, the rest only counted (100 MB of output costs a few kilobytes)."""

    def __init__(self, head_chars: int, tail_chars: int = 0) -> None:
        self._head_cap = max(0, head_chars)
        self._tail_cap = max(0, tail_chars)
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._head: list[str] = []
        self._head_len = 0
        self._tail = ""
        self.total = 0

    def feed(self, data: bytes) -> None:
        """Add raw bytes read from the stream."""
        self._add(self._decoder.decode(data))

    def add_text(self, text: str) -> None:
        """Add already decoded text."""
        self._add(text)

    def close(self) -> None:
        """Flush a dangling partial character at end of stream."""
        self._add(self._decoder.decode(b"", final=True))

    def _add(self, text: str) -> None:
        if not text:
            return
        self.total += len(text)
        room = self._head_cap - self._head_len
        if room > 0:
            part = text[:room]
            self._head.append(part)
            self._head_len += len(part)
            text = text[room:]
        if text and self._tail_cap:
            self._tail = (self._tail + text)[-self._tail_cap :]

    @property
    def truncated(self) -> bool:
        """Whether some of the text was dropped (only counted)."""
        return self.total > self._head_len + len(self._tail)

    def render(self, budget: int) -> str:
        """At most ``budget`` characters of the text, plus a marker saying how much was left out."""
        head = "".join(self._head)
        if not self.truncated:
            text = head + self._tail
            if len(text) <= budget:
                return text
            head, tail_source = text, text
        else:
            tail_source = self._tail
        budget = max(0, budget)
        tail_len = min(len(tail_source), budget // 4)
        head_part = head[: budget - tail_len]
        tail_part = tail_source[len(tail_source) - tail_len :] if tail_len else ""
        omitted = self.total - len(head_part) - len(tail_part)
        marker = f"... [output truncated: {omitted} more characters] ..."
        if tail_part:
            return f"{head_part}\n{marker}\n{tail_part}"
        return f"{head_part}\n{marker}"


def compose_streams(stdout: OutputBuffer, stderr: OutputBuffer, limit: int) -> tuple[str, str]:
    """Share one character budget between stdout and stderr: a flood on stdout still leaves
    room for the traceback on stderr, usually what the model needs to see."""
    if stdout.total + stderr.total <= limit:
        return stdout.render(limit), stderr.render(limit)
    half = limit // 2
    if stderr.total <= half:
        err_budget = stderr.total
    elif stdout.total <= half:
        err_budget = limit - stdout.total
    else:
        err_budget = half
    return stdout.render(limit - err_budget), stderr.render(err_budget)


class PipeProtocol(asyncio.SubprocessProtocol):
    """Hands every chunk a child writes to a sink at once, so pipes never fill up; the
    transport can be closed even when an escaped grandchild still holds the pipes open."""

    def __init__(self, sinks: dict[int, Callable[[bytes], None]]) -> None:
        self._sinks = sinks
        self._open_pipes: set[int] = set(sinks)
        self.exited = asyncio.Event()
        self.pipes_closed = asyncio.Event()
        if not self._open_pipes:
            self.pipes_closed.set()

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        sink = self._sinks.get(fd)
        if sink is not None:
            sink(data.encode() if isinstance(data, str) else data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self._open_pipes.discard(fd)
        if not self._open_pipes:
            self.pipes_closed.set()

    def process_exited(self) -> None:
        self.exited.set()


def stat_fields(pid: int | str) -> list[bytes] | None:
    """Fields of ``/proc/<pid>/stat`` after the command name (state first); None if gone."""
    try:
        raw = (_PROC / str(pid) / "stat").read_bytes()
    except OSError:
        return None
    # The command name may contain spaces and parentheses: split after the last ')'.
    return raw[raw.rfind(b")") + 2 :].split()


def _read_stat(pid: str) -> tuple[str, int] | None:
    """(state, process group) of a process, or None if it is gone."""
    fields = stat_fields(pid) or []
    try:
        return fields[0].decode(), int(fields[2])
    except (IndexError, ValueError):
        return None


def any_running(pids: list[int]) -> bool:
    """Whether one of ``pids`` is running or waiting for a CPU (state ``R``): on a loaded
    machine a fork bomb can hold still for a while without having stopped."""
    return any((info := _read_stat(str(pid))) is not None and info[0] == "R" for pid in pids)


def group_members(pgid: int) -> list[int] | None:
    """Live (non-zombie) processes of a process group; None when ``/proc`` is unavailable."""
    try:
        names = os.listdir(_PROC)
    except OSError:
        return None
    members: list[int] = []
    for name in names:
        if not name.isdigit():
            continue
        info = _read_stat(name)
        if info is not None and info[1] == pgid and info[0] not in ("Z", "X"):
            members.append(int(name))
    return members


def signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to a process group; False if the group no longer exists."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        logger.warning("not allowed to signal process group {}", pgid)
        return False
    return True


def kill_each(pids: list[int], sig: int) -> bool:
    """Send ``sig`` to each of ``pids``; whether it reached at least one."""
    delivered = False
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
            delivered = True
    return delivered


async def kill_group(pgid: int, *, deadline: float = 5.0) -> bool:
    """SIGKILL a process group until no live member is left; True when it is empty."""
    return await ProcessScope(pgid).kill(deadline=deadline)


async def terminate_group(
    pgid: int, leader_exited: asyncio.Event, *, grace: float, deadline: float = 5.0
) -> bool:
    """SIGTERM the group, give the leader ``grace`` seconds to exit, then SIGKILL everything."""
    return await ProcessScope(pgid).terminate(leader_exited, grace=grace, deadline=deadline)


def describe_returncode(returncode: int | None) -> str:
    """Human wording of an exit status (negative = killed by that signal, asyncio style)."""
    if returncode is None:
        return "still running"
    if returncode >= 0:
        return f"exit code: {returncode}"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = f"signal {-returncode}"
    return f"killed by {name}"


def format_seconds(seconds: float) -> str:
    """``5`` rather than ``5.0``; keep fractions that matter."""
    return f"{seconds:g}"


class ProcessScope:
    """A run's processes as one process group (the local case)."""

    def __init__(self, leader: int) -> None:
        self.leader = leader

    def members(self) -> list[int] | None:
        """Live processes of the run; None when ``/proc`` cannot tell."""
        return group_members(self.leader)

    def signal(self, sig: int) -> bool:
        """Deliver ``sig`` to the program (not to our supervisors); False if nothing is left."""
        return signal_group(self.leader, sig)

    def release(self) -> None:
        """The run is over and reaped: let go of what identified its processes."""

    async def kill(self, *, deadline: float = 5.0) -> bool:
        """SIGKILL everything until nothing is left (a process may be mid-``fork``); True: gone."""
        give_up = time.monotonic() + deadline
        pause = 0.002
        while True:
            delivered = self.signal(signal.SIGKILL)
            members = await in_thread(self.members)
            # Zombies are not members (harmless, waiting to be reaped); without /proc (None)
            # a signal that reached nobody is the only sign.
            if members == [] or (members is None and not delivered):
                return True
            if time.monotonic() >= give_up:
                if members is None:  # no /proc: zombies keep a group "existing" for killpg
                    return True
                logger.warning(f"sandbox run {self.leader} has processes after SIGKILL: {members}")
                return False
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.05)

    async def terminate(
        self, exited: asyncio.Event, *, grace: float, deadline: float = 5.0
    ) -> bool:
        """SIGTERM, ``grace`` seconds for the leader to go, then SIGKILL everything."""
        if grace > 0 and self.signal(signal.SIGTERM):
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(exited.wait(), grace)
        return await self.kill(deadline=deadline)

    async def watch_size(self, limit: int, interval: float) -> int:
        """Return as soon as the run has ``limit`` live processes (a fork bomb): the most the
        sandbox's cgroup lets it have, so reaching it means a fork was or will be refused."""
        while True:
            try:
                members = await in_thread(self.members)
            except RuntimeError:  # no executor any more (interpreter shutting down)
                members = None
            if members is None:
                await asyncio.Event().wait()  # nothing to watch: wait to be cancelled
            elif len(members) >= limit:
                return len(members)
            await asyncio.sleep(interval)


def _read(path: Path) -> str | None:
    try:
        return os.readlink(path)
    except OSError:
        return None


def _children(pid: int) -> list[int]:
    try:
        names = os.listdir(_PROC)
    except OSError:
        return []
    parent = str(pid).encode()
    return [int(n) for n in names if n.isdigit() and (stat_fields(n) or [])[1:2] == [parent]]


def is_alive(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie."""
    state = (stat_fields(pid) or [])[:1]
    return bool(state) and state[0] not in (b"Z", b"X")


class NamespaceScope(ProcessScope):
    """A bubblewrap run: the outer ``bwrap`` (group leader) plus its PID namespace, since a bash
    there moves to a group of its own; signals skip ``bwrap``, which would die of SIGINT."""

    def __init__(self, leader: int, supervisor_exe: str) -> None:
        super().__init__(leader)
        self._supervisor = supervisor_exe
        self._own_ns = _read(_PROC / "self" / "ns" / "pid")
        self._ns: str | None = None
        self._init: int | None = None  # the namespace's pid 1 (the inner bwrap), host pid
        # An open descriptor of the namespace keeps it, and so its number, ours: the kernel
        # hands a freed namespace's number to the next one created (another sandbox's run).
        self._hold: weakref.finalize[[int], NamespaceScope] | None = None
        self._released = False

    def _namespace(self) -> str | None:
        if self._ns is None and not self._released:
            for child in _children(self.leader):
                try:
                    fd = os.open(_PROC / str(child) / "ns" / "pid", os.O_RDONLY | os.O_CLOEXEC)
                except OSError:
                    continue
                ns = _read(_PROC / "self" / "fd" / str(fd))
                if ns is None or ns == self._own_ns:
                    os.close(fd)
                    continue
                self._ns, self._init = ns, child
                self._hold = weakref.finalize(self, os.close, fd)
                break
        return self._ns

    def release(self) -> None:
        """Forget the namespace: once its number is let go, another run's may reuse it."""
        self._released = True
        self._ns = self._init = None
        if self._hold is not None:
            self._hold()

    def members(self) -> list[int] | None:
        group = group_members(self.leader)
        if group is None:
            return None
        ns = self._namespace()
        if ns is None:
            return group
        found = set(group)
        for name in os.listdir(_PROC):
            if name.isdigit() and _read(_PROC / name / "ns" / "pid") == ns and is_alive(int(name)):
                found.add(int(name))
        return sorted(found)

    def signal(self, sig: int) -> bool:
        if sig == signal.SIGKILL:
            return self._kill_all()
        members = self.members() or []
        # Not to bwrap itself: it would die of it and take the sandbox down.
        program = [p for p in members if _read(_PROC / str(p) / "exe") != self._supervisor]
        return kill_each(program, sig) or bool(members)

    def _kill_all(self) -> bool:
        # The namespace's init first: the kernel then kills everything in the namespace at
        # once, which a fork bomb cannot outrun, unlike one kill per process found in /proc.
        ns = self._namespace()
        init = self._init
        # Still the namespace's init (a pid the system handed out again would not be in it).
        if init is not None and is_alive(init) and _read(_PROC / str(init) / "ns" / "pid") == ns:
            kill_each([init], signal.SIGKILL)
        members = self.members() or []
        alive = signal_group(self.leader, signal.SIGKILL)
        return kill_each(members, signal.SIGKILL) or alive


async def finish_run(
    scope: ProcessScope, protocol: PipeProtocol, transport: asyncio.SubprocessTransport
) -> None:
    """Kill what is left of a run, reap its leader and collect the last output."""
    await scope.kill()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(protocol.exited.wait(), 5.0)
    # A process that left the group may still hold the pipes: do not wait for it forever.
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(protocol.pipes_closed.wait(), 1.0)
    transport.close()
    scope.release()
