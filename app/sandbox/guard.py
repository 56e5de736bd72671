"""The process limit of a sandbox, enforced for the sandbox's whole life.

``max_processes`` bounds every process a sandbox has at once, not just those of the command in
flight: background jobs left by one command count against the next. Two ways, best first:

* **cgroup** (``pids.max``): where this process may create a child cgroup in a hierarchy with
  the pids controller (cgroup v2, or the v1 ``pids`` hierarchy), each sandbox gets its own;
  every launched process joins it before ``exec`` (see ``launcher``), so the kernel refuses
  the fork past the limit, ``setsid`` or not, and closing the sandbox kills everything in it
  and removes the cgroup. Typical when running as root.
* **watchdog**: otherwise, a task that lives as long as the sandbox counts the processes of
  every run it launched (their scopes) and kills all of them once there are more than the
  limit. A fast fork bomb can overshoot between two polls (50 ms), and locally a process
  that left its run's process group with ``setsid`` is not seen.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
import time
import weakref
from pathlib import Path

from app.logger import logger
from app.sandbox.processes import ProcessScope

__all__ = ["ProcessGuard", "find_pids_hierarchy", "sweep_orphans"]

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


def find_pids_hierarchy() -> Path | None:
    """Our own cgroup in a hierarchy with the pids controller, if we may create children."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    mounts = _mounts()
    for line in lines:
        hid, controllers, path = line.split(":", 2)
        for point, root, fstype, options in mounts:
            v1 = fstype == "cgroup" and "pids" in options.split(",") and "pids" in controllers
            v2 = fstype == "cgroup2" and hid == "0"
            if not (v1 or v2):
                continue
            relative = os.path.relpath(path, root) if path.startswith(root) else path
            base = Path(point) / relative.lstrip("/").removeprefix(".")
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


def _procs(cgroup: Path) -> list[int]:
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
        path = parent / f"openmanus-{os.getpid()}-{next(_counter)}"
        try:
            path.mkdir()
        except OSError as exc:
            logger.debug(f"no cgroup for the sandbox ({exc}); using the process watchdog")
            return
        try:
            if self.limit is not None:
                (path / "pids.max").write_text(str(self.limit))
        except OSError as exc:
            logger.debug(f"cannot set pids.max ({exc}); using the process watchdog")
            with contextlib.suppress(OSError):
                path.rmdir()
            return
        self.cgroup = path
        # A sandbox dropped without cleanup() (a tool nobody cleaned up) still leaves no
        # cgroup and no process behind: at garbage collection, or at the latest at exit.
        self._finalizer = weakref.finalize(self, _empty_and_remove, path)

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
            return _procs(self.cgroup)
        found: set[int] = set()
        for scope in self._scopes:
            found.update(scope.members() or ())
        return sorted(found)

    def refused(self) -> int:
        """Forks the cgroup has refused so far (``pids.events``); 0 without a cgroup."""
        if self.cgroup is None:
            return 0
        try:
            for line in (self.cgroup / "pids.events").read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "max":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def current(self) -> int:
        """How many processes the sandbox has now."""
        return len(self.members())

    async def _watch(self) -> None:
        limit = self.limit
        assert limit is not None
        while self._scopes:
            scopes = list(self._scopes)
            try:
                counts = await asyncio.to_thread(_count_each, scopes)
            except RuntimeError:  # no executor any more (interpreter shutting down)
                return
            gone = {id(s) for s, found in zip(scopes, counts, strict=True) if found == []}
            self._scopes = [s for s in self._scopes if id(s) not in gone]
            count = len({pid for found in counts for pid in found or ()})
            if count > limit:
                logger.warning(f"sandbox over its process limit ({count} > {limit}): killing")
                for scope in list(self._scopes):
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
        if cgroup is not None:
            await asyncio.to_thread(_empty_and_remove, cgroup)


def sweep_orphans(parent: Path) -> list[Path]:
    """Remove the cgroups of agents that died without cleaning up (SIGKILL, a crash): their
    processes are killed and the groups removed. A group is an orphan when the agent whose
    pid its name carries is gone; returns the groups removed."""
    removed: list[Path] = []
    try:
        entries = list(parent.glob("openmanus-*-*"))
    except OSError:
        return removed
    for cgroup in entries:
        owner = cgroup.name.split("-")[1]
        if not owner.isdigit() or int(owner) == os.getpid() or Path(f"/proc/{owner}").exists():
            continue
        _empty_and_remove(cgroup, deadline=1.0)
        if not cgroup.exists():
            removed.append(cgroup)
    if removed:
        logger.debug(f"removed {len(removed)} cgroup(s) of agents that died without cleanup")
    return removed


def _empty_and_remove(cgroup: Path, deadline: float = 5.0) -> None:
    give_up = time.monotonic() + deadline
    pause = 0.002
    while True:
        procs = _procs(cgroup)
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
