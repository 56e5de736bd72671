"""``local``: plain subprocesses on this machine, against accidents, not an adversary: scrubbed
credentials, rlimits, the process limit, and a reaper in its own session that kills what is
left of the runs when the agent dies, even by ``kill -9``."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import functools
import os
import subprocess
import sys

from app.logger import logger
from app.sandbox.base import LaunchSpec, Sandbox
from app.sandbox.launcher import launcher_argv
from app.sandbox.processes import ProcessScope

#: Reads process group ids (one a line) until its stdin ends, then kills those still alive
#: and the cgroup (argv[1], if any). Groups found empty are forgotten every second, so a
#: group id the system hands out again later is never killed by mistake.
_REAPER = r"""
import os, select, signal, sys
for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGPIPE", "SIGTSTP"):
    signal.signal(getattr(signal, name), signal.SIG_IGN)
cgroup = sys.argv[1] if len(sys.argv) > 1 else ""
groups, pending = set(), b""
def alive(group):
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except OSError:
        pass
    return True
while True:
    ready, _, _ = select.select([0], [], [], 1.0)
    if ready:
        data = os.read(0, 4096)
        if not data:
            break
        *lines, pending = (pending + data).split(b"\n")
        groups.update(int(line) for line in lines if line.strip().isdigit())
    groups = {group for group in groups if alive(group)}
if cgroup:
    try:
        with open(cgroup, "w") as f:
            f.write("1")
    except OSError:
        pass
for group in groups:
    try:
        os.killpg(group, signal.SIGKILL)
    except OSError:
        pass
"""


@functools.cache  # said once per process
def _warn_no_network_block() -> None:
    logger.warning(
        "sandbox backend 'local' cannot block network access (network_enabled = "
        "false only takes effect with backend 'bubblewrap' or 'docker')"
    )


class LocalSandbox(Sandbox):
    """The default backend."""

    backend = "local"
    _reaper: subprocess.Popen[bytes] | None = None

    async def _start(self) -> None:
        close_own_environ()
        self._start_reaper()
        # Only to a user who asked for no network (the default is no request at all).
        asked = "network_enabled" in self.settings.model_fields_set
        if asked and not self.settings.network_enabled:
            _warn_no_network_block()

    def _wrap(
        self, argv: list[str], rlimits: dict[str, int], env: dict[str, str], cwd: str
    ) -> LaunchSpec:
        return LaunchSpec(argv=launcher_argv(argv, self.launch_options(rlimits)), env=env, cwd=cwd)

    def _scope(self, leader: int) -> ProcessScope:
        """A run (its group id is its pid) is told to the reaper, so it dies with the agent."""
        reaper = self._reaper
        if reaper is not None and reaper.stdin is not None:
            try:
                reaper.stdin.write(f"{leader}\n".encode())
                reaper.stdin.flush()
            except OSError:
                self._reaper = None
        return super()._scope(leader)

    def _start_reaper(self) -> None:
        """The process that kills what is left of the runs when the agent dies."""
        if self._reaper is not None and self._reaper.poll() is None:
            return
        cgroup = self.guard.cgroup
        argv = [sys.executable or "python3", "-I", "-S", "-c", _REAPER]
        if cgroup is not None:
            argv.append(str(cgroup / "cgroup.kill"))
        try:
            self._reaper = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # no Ctrl-C from the terminal, not in any run's group
                close_fds=True,
                cwd="/",  # not a process "in the workspace"
            )
        except OSError as e:
            self._reaper = None
            logger.warning(f"sandbox 'local': no reaper, processes may outlive a crash ({e})")

    async def _cleanup(self) -> None:
        reaper, self._reaper = self._reaper, None
        if reaper is None:
            return
        with contextlib.suppress(OSError):
            if reaper.stdin is not None:
                reaper.stdin.close()  # its cue: kill what is left, then exit
        with contextlib.suppress(subprocess.TimeoutExpired):
            await asyncio.to_thread(reaper.wait, 10)


_PR_SET_DUMPABLE = 4


def close_own_environ() -> bool:
    """Make the agent's process non-dumpable, so a child of the same user cannot read its
    ``/proc/<pid>/environ`` nor ptrace it (root children still can); True when it took."""
    if os.geteuid() == 0:
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False
