"""The process limit of a sandbox for its whole life: a pids cgroup of its own where we may
create one (the kernel refuses the fork), else a watchdog that counts every run's scope and
kills them all past the limit."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
import time
import weakref
from collections.abc import Iterator
from pathlib import Path

from app.logger import logger
from app.sandbox.processes import ProcessScope, in_thread

_counter = itertools.count(1)
_swept: set[Path] = set()  # hierarchies already swept for orphans by this process
_POLL = 0.05


def _mounts() -> list[tuple[str, str, str, str]]:
    """(mount point, root, fs type, super options) of every mount."""
    found: list[tuple[str, str, str, str]] = []
    try:
        text = Path("/proc/self/mountinfo").read_text()
    except OSError:
        return found
    for line in text.splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) >= 5 and len(tail) >= 3:
            point = fields[4].replace("\\040", " ")
            found.append((point, fields[3], tail[0], tail[2]))
    return found


def pids_cgroup_dirs(pid: int | str = "self") -> Iterator[tuple[Path, bool]]:
    """The directories of process ``pid``'s cgroups that hold the pids controller, with
    whether each is in the unified (v2) hierarchy, as seen through this host's mounts."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return
    mounts = _mounts()
    for line in lines:
        hid, controllers, path = line.split(":", 2)
        for point, root, fstype, options in mounts:
            v1 = fstype == "cgroup" and "pids" in options.split(",") and "pids" in controllers
            v2 = fstype == "cgroup2" and hid == "0"
            if v1 or v2:
                relative = os.path.relpath(path, root) if path.startswith(root) else path
                yield Path(point) / relative.lstrip("/").removeprefix("."), v2


def find_pids_hierarchy() -> Path | None:
    """Our own cgroup in a hierarchy with the pids controller, if we may create children."""
    for base, v2 in pids_cgroup_dirs():
        if v2 and not _v2_delegates_pids(base):
            continue
        if base.is_dir() and os.access(base, os.W_OK):
            return base
    return None


def _v2_delegates_pids(base: Path) -> bool:
    try:
        if "pids" not in (base / "cgroup.controllers").read_text().split():
            return False
        if "pids" in (base / "cgroup.subtree_control").read_text().split():
            return True
        (base / "cgroup.subtree_control").write_text("+pids")  # fails if base has processes
        return True
    except OSError:
        return False


def _count_each(scopes: list[ProcessScope]) -> list[list[int] | None]:
    return [scope.members() for scope in scopes]


def _refused_in(cgroup: Path) -> int:
    try:
        for line in (cgroup / "pids.events").read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "max":
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


def cgroup_members(cgroup: Path) -> list[int]:
    try:
        return [int(p) for p in (cgroup / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


class ProcessGuard:
    """One sandbox's process limit (``limit`` None: count nothing, but still kill at close)."""

    def __init__(self, limit: int | None, *, use_cgroup: bool = True) -> None:
        self.limit = limit
        self._use_cgroup = use_cgroup
        self.cgroup: Path | None = None
        self._scopes: list[ProcessScope] = []
        self._watchdog: asyncio.Task[None] | None = None
        self._finalizer: weakref.finalize[[Path], ProcessGuard] | None = None
        #: How often the watchdog killed the sandbox's runs for being over the limit.
        self.limit_kills = 0
        self._refused_before = 0  # forks refused by cgroups given up (``make_room``)
        self._retired: list[Path] = []  # cgroups given up that could not be removed yet

    @property
    def mode(self) -> str:
        return "cgroup" if self.cgroup is not None else "watchdog"

    @property
    def cgroup_procs(self) -> str | None:
        """The file a launched process writes itself into (None: no cgroup)."""
        return str(self.cgroup / "cgroup.procs") if self.cgroup is not None else None

    def open(self) -> None:
        """Create the cgroup when possible (synchronous: a few small writes)."""
        if self.cgroup is not None or not self._use_cgroup:
            return
        parent = find_pids_hierarchy()
        if parent is None:
            return
        if parent not in _swept:
            _swept.add(parent)
            sweep_orphans(parent)
        path = self._new_cgroup(parent)
        if path is not None:
            self._use(path)

    def _new_cgroup(self, parent: Path) -> Path | None:
        path = parent / f"openmanus-{os.getpid()}-{next(_counter)}"
        try:
            path.mkdir()
        except OSError as exc:
            logger.debug(f"no cgroup for the sandbox ({exc}); using the process watchdog")
            return None
        try:
            if self.limit is not None:
                (path / "pids.max").write_text(str(self.limit))
        except OSError as exc:
            logger.debug(f"cannot set pids.max ({exc}); using the process watchdog")
            with contextlib.suppress(OSError):
                path.rmdir()
            return None
        return path

    def _use(self, path: Path) -> None:
        self.cgroup = path
        if self._finalizer is not None:
            self._finalizer.detach()
        # A sandbox dropped without cleanup() (a tool nobody cleaned up) still leaves no
        # cgroup and no process behind: at garbage collection, or at the latest at exit.
        self._finalizer = weakref.finalize(self, empty_and_remove, path)

    def track(self, scope: ProcessScope) -> None:
        """Count ``scope``'s processes from now on (watchdog mode) and make sure it runs."""
        if self.cgroup is not None or self.limit is None:
            return
        self._scopes.append(scope)
        loop = asyncio.get_running_loop()
        task = self._watchdog
        if task is None or task.done() or task.get_loop() is not loop:
            self._watchdog = loop.create_task(self._watch())

    def members(self) -> list[int]:
        """Every live process of the sandbox."""
        if self.cgroup is not None:
            return cgroup_members(self.cgroup)
        found: set[int] = set()
        for scope in self._scopes:
            found.update(scope.members() or ())
        return sorted(found)

    def refused(self) -> int:
        """Forks the sandbox's cgroups have refused so far (``pids.events``); 0 without."""
        if self.cgroup is None:
            return self._refused_before
        return self._refused_before + _refused_in(self.cgroup)

    def current(self) -> int:
        """How many processes the sandbox has now."""
        return len(self.members())

    def pressure(self) -> tuple[int, int]:
        """(forks the cgroup refused, watchdog kills) so far: both only grow, so a change
        between two calls means the limit was hit meanwhile (a fork bomb, say)."""
        return self.refused(), self.limit_kills

    def has_room(self) -> bool:
        """Whether a new command has room to start (a shell and a few processes): after a
        fork bomb was killed its processes still count until they are reaped."""
        if self.limit is None or self.cgroup is None:
            return True
        try:
            used = int((self.cgroup / "pids.current").read_text())
        except (OSError, ValueError):
            used = len(cgroup_members(self.cgroup))
        return used <= self.limit - max(4, self.limit // 8)

    def make_room(self) -> bool:
        """Move the live processes to a new cgroup when the old one is full of dead ones (an
        init that does not reap orphans, such as the agent as a container's PID 1, would
        leave them counted forever); True when there is room now."""
        old = self.cgroup
        if old is None or self.has_room():
            return True
        new = self._new_cgroup(old.parent)
        if new is None:
            return False
        for _ in range(10):  # a process forking meanwhile leaves a child behind: again
            procs = cgroup_members(old)
            if not procs:
                break
            for pid in procs:
                with contextlib.suppress(OSError):
                    (new / "cgroup.procs").write_text(str(pid))
        self._refused_before += _refused_in(old)
        self._use(new)
        try:
            old.rmdir()  # no live process left: only the dead ones' count goes with it
        except OSError:
            self._retired.append(old)  # removed at close
        logger.debug(f"sandbox cgroup {old} full of unreaped processes: now {new}")
        return self.has_room()

    async def _watch(self) -> None:
        limit = self.limit
        assert limit is not None
        while self._scopes:
            scopes = list(self._scopes)
            try:
                counts = await in_thread(_count_each, scopes)
            except RuntimeError:  # no executor any more (interpreter shutting down)
                return
            gone = {id(s) for s, found in zip(scopes, counts, strict=True) if found == []}
            self._scopes = [s for s in self._scopes if id(s) not in gone]
            count = len({pid for found in counts for pid in found or ()})
            if count > limit:
                logger.warning(f"sandbox over its process limit ({count} > {limit}): killing")
                self.limit_kills += 1
                # Only the runs counted: one started while we counted (a loaded machine takes
                # seconds over a bomb's thousand processes) is not part of the excess.
                for scope in scopes:
                    scope.signal(signal.SIGKILL)
            await asyncio.sleep(_POLL)
        self._watchdog = None

    async def close(self) -> None:
        """Kill every process of the sandbox and remove the cgroup."""
        task, self._watchdog = self._watchdog, None
        if task is not None:
            task.cancel()
        scopes, self._scopes = self._scopes, []
        for scope in scopes:
            await scope.kill()
        cgroup, self.cgroup = self.cgroup, None
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if cgroup is not None:  # pressure() only grows, across a close and a new open too
            self._refused_before += await asyncio.to_thread(_refused_in, cgroup)
        retired, self._retired = self._retired, []
        for old in [*retired, *([cgroup] if cgroup is not None else [])]:
            await asyncio.to_thread(empty_and_remove, old)


def sweep_orphans(parent: Path) -> list[Path]:
    """Kill and remove the cgroups of agents that died without cleaning up; those removed."""
    removed: list[Path] = []
    try:
        entries = list(parent.glob("openmanus-*-*"))
    except OSError:
        return removed
    for cgroup in entries:
        owner = cgroup.name.split("-")[1]
        if not owner.isdigit() or int(owner) == os.getpid() or Path(f"/proc/{owner}").exists():
            continue
        empty_and_remove(cgroup, deadline=1.0)
        if not cgroup.exists():
            removed.append(cgroup)
    if removed:
        logger.debug(f"removed {len(removed)} cgroup(s) of agents that died without cleanup")
    return removed


def empty_and_remove(cgroup: Path, deadline: float = 5.0) -> None:
    give_up = time.monotonic() + deadline
    pause = 0.002
    while True:
        procs = cgroup_members(cgroup)
        for pid in procs:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        if not procs:
            try:
                cgroup.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                pass  # exiting tasks still leaving: try again
        if time.monotonic() >= give_up:
            logger.warning(f"could not empty and remove cgroup {cgroup}: {procs}")
            return
        time.sleep(pause)
        pause = min(pause * 2, 0.05)
