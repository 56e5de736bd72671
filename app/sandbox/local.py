"""``local``: plain subprocesses on this machine, bounded by rlimits and a process watchdog.

Protects against accidents, not against an adversary: code sees the whole file system with
the agent's permissions and has the network. What it does give: credentials scrubbed from
the environment, per-process memory/CPU/file-size limits, a process-count watchdog, and every
process of a run killed afterwards (unless it left the process group with ``setsid``).
"""

from __future__ import annotations

from app.logger import logger
from app.sandbox.base import LaunchSpec, Sandbox
from app.sandbox.launcher import launcher_argv

__all__ = ["LocalSandbox"]

_network_warning_shown = False


class LocalSandbox(Sandbox):
    """The default backend."""

    backend = "local"

    async def _start(self) -> None:
        global _network_warning_shown
        if not self.settings.network_enabled and not _network_warning_shown:
            _network_warning_shown = True
            logger.info(
                "sandbox backend 'local' cannot block network access (network_enabled = "
                "false only takes effect with backend 'bubblewrap' or 'docker')"
            )

    def _wrap(
        self, argv: list[str], rlimits: dict[str, int], env: dict[str, str], cwd: str
    ) -> LaunchSpec:
        return LaunchSpec(argv=launcher_argv(argv, rlimits), env=env, cwd=cwd)
