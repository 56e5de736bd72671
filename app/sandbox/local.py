"""``local``: plain subprocesses on this machine, against accidents, not an adversary: scrubbed
credentials, rlimits, the process limit, and a reaper (:mod:`.reaper`) that kills what is left
of the runs when the agent dies, even by ``kill -9``: the sandbox's cgroup where there is one,
else every process carrying the sandbox's marker in its environment."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import functools
import os
import secrets
import subprocess
from dataclasses import replace

from app.logger import logger
from app.sandbox.base import LaunchSpec, Sandbox
from app.sandbox.hostside import HOST_CWD, start_reaper
from app.sandbox.launcher import launcher_argv
from app.sandbox.processes import ProcessScope

#: Environment variable marking every process of a local sandbox (inherited by everything a
#: run starts, ``setsid`` or not), so that its reaper finds them without a cgroup.
SANDBOX_MARKER = "OPENMANUS_SANDBOX"


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
    _marker: str = ""

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
        # The stub starts outside the workspace and enters it just before ``exec``.
        options = replace(self.launch_options(rlimits), cwd=cwd)
        env = {**env, SANDBOX_MARKER: self._marker}
        return LaunchSpec(argv=launcher_argv(argv, options), env=env, cwd=HOST_CWD)

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
        self._marker = secrets.token_hex(8)
        cgroup = self.guard.cgroup
        options = {
            "cgroup": str(cgroup) if cgroup is not None else None,
            "marker": f"{SANDBOX_MARKER}={self._marker}",
        }
        self._reaper = start_reaper(options, site=False, what="sandbox 'local'")

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
