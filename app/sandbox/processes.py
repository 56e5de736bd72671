"""Which processes belong to one run, and how to signal or kill all of them.

Locally a run is a process group (the child starts a new session). Under bubblewrap that is
not enough: an interactive bash inside the sandbox moves itself into a group of its own, and
the outer ``bwrap`` dies of SIGINT, taking the sandbox with it. There a run is the sandbox's
PID namespace instead, and signals meant for the program skip the ``bwrap`` supervisors.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from pathlib import Path

from app.tool._process import PipeProtocol, group_members, kill_group, signal_group

__all__ = ["GroupScope", "NamespaceScope", "ProcessScope", "finish_run"]

_PROC = Path("/proc")


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

    async def kill(self, *, deadline: float = 5.0) -> bool:
        """SIGKILL everything until nothing is left; True when the run is gone."""
        return await kill_group(self.leader, deadline=deadline)

    async def terminate(self, exited: asyncio.Event, *, grace: float) -> bool:
        """SIGTERM, ``grace`` seconds for the leader to go, then SIGKILL everything."""
        if grace > 0 and self.signal(signal.SIGTERM):
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(exited.wait(), grace)
        return await self.kill()

    async def watch_size(self, limit: int, interval: float) -> int:
        """Return as soon as the run has more than ``limit`` live processes (a fork bomb)."""
        while True:
            try:
                members = await asyncio.to_thread(self.members)
            except RuntimeError:  # no executor any more (interpreter shutting down)
                members = None
            if members is None:
                await asyncio.Event().wait()  # nothing to watch: wait to be cancelled
            elif len(members) > limit:
                return len(members)
            await asyncio.sleep(interval)


#: The local case under its descriptive name.
GroupScope = ProcessScope


def _read(path: Path) -> str | None:
    try:
        return os.readlink(path)
    except OSError:
        return None


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        names = os.listdir(_PROC)
    except OSError:
        return found
    for name in names:
        if not name.isdigit():
            continue
        try:
            raw = (_PROC / name / "stat").read_bytes()
        except OSError:
            continue
        fields = raw[raw.rfind(b")") + 2 :].split()
        if len(fields) > 1 and fields[1] == str(pid).encode():
            found.append(int(name))
    return found


def _alive(pid: int) -> bool:
    try:
        raw = (_PROC / str(pid) / "stat").read_bytes()
    except OSError:
        return False
    state = raw[raw.rfind(b")") + 2 :].split()[:1]
    return bool(state) and state[0] not in (b"Z", b"X")


class NamespaceScope(ProcessScope):
    """A bubblewrap run: the outer ``bwrap`` (group leader) plus its PID namespace."""

    def __init__(self, leader: int, supervisor_exe: str) -> None:
        super().__init__(leader)
        self._supervisor = supervisor_exe
        self._own_ns = _read(_PROC / "self" / "ns" / "pid")
        self._ns: str | None = None

    def _namespace(self) -> str | None:
        if self._ns is None:
            for child in _children(self.leader):
                ns = _read(_PROC / str(child) / "ns" / "pid")
                if ns is not None and ns != self._own_ns:
                    self._ns = ns
                    break
        return self._ns

    def members(self) -> list[int] | None:
        group = group_members(self.leader)
        if group is None:
            return None
        ns = self._namespace()
        if ns is None:
            return group
        found = set(group)
        for name in os.listdir(_PROC):
            if name.isdigit() and _read(_PROC / name / "ns" / "pid") == ns and _alive(int(name)):
                found.add(int(name))
        return sorted(found)

    def signal(self, sig: int) -> bool:
        if sig == signal.SIGKILL:
            return self._kill_all()
        members = self.members() or []
        delivered = False
        for pid in members:
            if _read(_PROC / str(pid) / "exe") == self._supervisor:
                continue  # bwrap would die of it and take the sandbox down
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
                delivered = True
        return delivered or bool(members)

    def _kill_all(self) -> bool:
        members = self.members() or []
        alive = signal_group(self.leader, signal.SIGKILL)
        for pid in members:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                alive = True
        return alive

    async def kill(self, *, deadline: float = 5.0) -> bool:
        give_up = time.monotonic() + deadline
        pause = 0.002
        while True:
            self._kill_all()
            members = await asyncio.to_thread(self.members)
            if not members:
                return True
            if time.monotonic() >= give_up:
                return False
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.05)


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
