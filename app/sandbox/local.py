"""``local``: plain subprocesses on this machine, bounded by rlimits and a process watchdog.

Protects against accidents, not against an adversary: code runs as the agent's user, sees the
whole file system with its permissions and has the network. What it does give: credentials
scrubbed from the environment (and the agent's own ``/proc/<pid>/environ`` closed to it when
the agent is not root), per-process memory/CPU/file-size limits, the sandbox's process limit
(see ``guard``), and every process of a run killed afterwards (unless it left the process
group with ``setsid``; with a cgroup those die when the sandbox closes).
"""

from __future__ import annotations

import ctypes
import os

from app.logger import logger
from app.sandbox.base import LaunchSpec, Sandbox
from app.sandbox.launcher import launcher_argv

__all__ = ["LocalSandbox", "close_own_environ"]

_network_warning_shown = False


class LocalSandbox(Sandbox):
    """The default backend."""

    backend = "local"

    async def _start(self) -> None:
        global _network_warning_shown
        close_own_environ()
        if not self.settings.network_enabled and not _network_warning_shown:
            _network_warning_shown = True
            logger.info(
                "sandbox backend 'local' cannot block network access (network_enabled = "
                "false only takes effect with backend 'bubblewrap' or 'docker')"
            )

    def _wrap(
        self, argv: list[str], rlimits: dict[str, int], env: dict[str, str], cwd: str
    ) -> LaunchSpec:
        return LaunchSpec(argv=launcher_argv(argv, self.launch_options(rlimits)), env=env, cwd=cwd)


_PR_SET_DUMPABLE = 4


def close_own_environ() -> bool:
    """Make this (the agent's) process non-dumpable, so a child running as the same user
    cannot read ``/proc/<agent pid>/environ`` (nor ptrace the agent). Root children still can
    (CAP_SYS_PTRACE): there only redaction of the scrubbed values protects them. True when
    the setting took."""
    if os.geteuid() == 0:
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False
