"""The reaper of a sandbox: a process of its own that outlives the agent and kills what the
agent's runs left when the agent is gone, even after ``kill -9``.

Run as a script, isolated (``python -I reaper.py OPTIONS``, working directory ``/``, a
session of its own: no Ctrl-C from the terminal), it imports nothing of ours. It reads the
process groups of the runs on stdin, one a line, and forgets those found empty (so a group id
the system hands out again later is never killed by mistake). When stdin ends (the agent
exited, died, or cleaned the sandbox up) it kills, until none is left:

- every process of the sandbox's cgroup (``cgroup.kill`` on cgroup v2, one by one on v1),
  then removes the cgroup: ``setsid`` and double forks cannot leave it;
- every process whose environment carries the sandbox's marker (inherited by whatever a run
  starts, in its own session or not): the same without a cgroup, unless a process drops its
  environment as well (docs/sandbox.md);
- the groups it was told about;
- and on the docker backend removes the container.

OPTIONS is JSON: ``{"cgroup": dir or null, "marker": "NAME=value" or null, "container": id
or null}``.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import sys
import time

#: Seconds the reaper keeps killing after the agent is gone (a run may be mid-fork).
_DEADLINE = 10.0


def _alive(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    state = stat[stat.rfind(b")") + 2 :][:1]
    return state not in (b"Z", b"X", b"")


def _group_exists(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except OSError:
        pass
    return True


def _cgroup_members(cgroup: str) -> list[int]:
    try:
        with open(os.path.join(cgroup, "cgroup.procs")) as f:
            return [int(line) for line in f.read().split()]
    except (OSError, ValueError):
        return []


def _marked(marker: bytes) -> list[int]:
    """Live processes whose environment holds ``marker`` (``NAME=value``)."""
    found = []
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                environ = f.read()
        except OSError:
            continue
        if marker in environ.split(b"\0") and _alive(int(name)):
            found.append(int(name))
    return found


def _kill(pid: int) -> None:
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)


def kill_everything(cgroup: str | None, marker: bytes | None, groups: set[int]) -> None:
    """Kill the sandbox's processes until none is left (or the deadline passes)."""
    give_up = time.monotonic() + _DEADLINE
    pause = 0.002
    while True:
        left = False
        if cgroup:
            with contextlib.suppress(OSError), open(os.path.join(cgroup, "cgroup.kill"), "w") as f:
                f.write("1")
            for pid in _cgroup_members(cgroup):
                if _alive(pid):
                    _kill(pid)
                    left = True
        if marker:
            for pid in _marked(marker):
                _kill(pid)
                left = True
        for group in list(groups):
            try:
                os.killpg(group, signal.SIGKILL)
                left = True
            except ProcessLookupError:
                groups.discard(group)
            except OSError:
                groups.discard(group)
        if not left or time.monotonic() > give_up:
            break
        time.sleep(pause)
        pause = min(pause * 2, 0.05)
    while cgroup and time.monotonic() <= give_up:
        try:
            os.rmdir(cgroup)
            break
        except FileNotFoundError:
            break
        except OSError:  # the last processes are still leaving
            time.sleep(0.01)


def remove_container(container: str) -> None:
    """Remove the docker sandbox's container (gone already: nothing to do)."""
    try:
        import docker

        client = docker.from_env()
    except Exception:
        return
    with contextlib.suppress(Exception):
        client.containers.get(container).remove(force=True)
    with contextlib.suppress(Exception):
        client.close()


def main(argv: list[str]) -> int:
    options = json.loads(argv[0]) if argv else {}
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGPIPE", "SIGTSTP"):
        signal.signal(getattr(signal, name), signal.SIG_IGN)
    groups: set[int] = set()
    pending = b""
    while True:
        ready, _, _ = select.select([0], [], [], 1.0)
        if ready:
            try:
                data = os.read(0, 4096)
            except OSError:
                data = b""
            if not data:
                break
            *lines, pending = (pending + data).split(b"\n")
            groups.update(int(line) for line in lines if line.strip().isdigit())
        groups = {group for group in groups if _group_exists(group)}
    marker = options.get("marker")
    kill_everything(options.get("cgroup"), marker.encode() if marker else None, groups)
    if options.get("container"):
        remove_container(options["container"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
