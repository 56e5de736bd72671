"""``bubblewrap``: Linux namespaces through Debian's ``bwrap``: the system read-only, the
workspace read-write, a private ``/tmp``, its own user, PID and network namespaces, no
capabilities. It never runs as root: an agent running as root drops to the workspace's owner,
else ``nobody`` (``handover``), with the bound directories staged while still root."""

from __future__ import annotations

import asyncio
import functools
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from app.config import SandboxSettings, config
from app.exceptions import SandboxUnavailableError
from app.logger import logger
from app.sandbox import hostside, netns
from app.sandbox.base import PRIVATE_ENTRIES, LaunchSpec, Sandbox
from app.sandbox.handover import adopt_tree
from app.sandbox.launcher import launcher_argv
from app.sandbox.processes import NamespaceScope, ProcessScope

#: Read-only system locations, bound when they exist.
_SYSTEM_DIRS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: Who runs sandboxed code when the agent is root and the workspace belongs to root.
NOBODY = (65534, 65534)
#: Existing directories the launcher may cover with its staging tmpfs (in its own namespace).
_STAGE_ROOTS = ("/mnt", "/media", "/srv")
#: Inside /etc, but not for model-run code: password hashes, host keys, TLS private keys.
_MASKED_FILES = ("/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/sudoers")
_MASKED_DIRS = ("/etc/ssh", "/etc/ssl/private", "/etc/sudoers.d", "/etc/openmanus")


class BubblewrapSandbox(Sandbox):
    """Each command runs in a fresh set of namespaces; nothing is kept between commands."""

    backend = "bubblewrap"
    signal_as_status = True

    def __init__(
        self,
        settings: SandboxSettings | None = None,
        workspace: str | os.PathLike[str] | None = None,
        *,
        bwrap: str | None = None,
    ) -> None:
        super().__init__(settings, workspace)
        self._bwrap_arg = bwrap
        self._bwrap: str | None = None

    @property
    def bwrap(self) -> str:
        """Absolute, symlink-free path of ``bwrap`` (to tell it apart in ``/proc``)."""
        if self._bwrap is None:
            found = self._bwrap_arg or shutil.which("bwrap")
            if not found:
                raise SandboxUnavailableError(
                    "sandbox backend 'bubblewrap' needs the bwrap program, which is not "
                    "installed (Debian/Ubuntu: apt-get install bubblewrap), or choose "
                    'backend = "local" in [sandbox]'
                )
            self._bwrap = os.path.realpath(found)
        return self._bwrap

    @property
    def run_as(self) -> tuple[int, int] | None:
        """(uid, gid) sandboxed code runs as when the agent is root; None: the agent's own."""
        if os.geteuid() != 0:
            return None
        info = self.workspace.stat()
        if info.st_uid == 0:
            return NOBODY
        return (info.st_uid, info.st_gid if info.st_gid != 0 else NOBODY[1])

    @property
    def file_owner(self) -> tuple[int, int] | None:
        user = self.run_as
        return user if user == NOBODY else None

    async def _start(self) -> None:
        user = self.run_as
        if user == NOBODY:
            await asyncio.to_thread(adopt_tree, self.workspace, user, skip=PRIVATE_ENTRIES)
        # One real launch proves that namespaces are allowed here (containers and hardened
        # kernels may forbid them), so the failure is a clear message rather than a tool error.
        spec = self.command(["true"])
        proc = await asyncio.create_subprocess_exec(
            *spec.argv,
            env=spec.env,
            cwd=spec.cwd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await proc.communicate()
        if proc.returncode != 0:
            reason = err.decode(errors="replace").strip() or f"exit status {proc.returncode}"
            raise SandboxUnavailableError(
                f"bubblewrap cannot create a sandbox on this machine: {reason}. User "
                "namespaces may be disabled (sysctl kernel.unprivileged_userns_clone) or "
                'forbidden by the container; use backend = "local" or "docker".'
            )

    def _scope(self, leader: int) -> ProcessScope:
        return NamespaceScope(leader, self.bwrap)

    def _bind_sources(self) -> list[Path]:
        """Read-only locations besides the system: the Python running us (and its venv), also
        by their real paths (the interpreter is run by one: :func:`hostside.python`)."""
        prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix}
        paths = {Path(p) for p in prefixes} | {Path(os.path.realpath(p)) for p in prefixes}
        if sys.executable:
            paths.add(Path(os.path.realpath(sys.executable)).parent.parent)
            paths.add(Path(hostside.python()).parent.parent)
        inside_system = tuple(Path(d) for d in _SYSTEM_DIRS)
        return sorted(
            p for p in paths if p.is_dir() and not any(p.is_relative_to(d) for d in inside_system)
        )

    def _masks(self) -> list[str]:
        """Arguments hiding secrets that would otherwise be visible through a bound path."""
        args: list[str] = []
        for name in _MASKED_FILES:
            if os.path.lexists(name):
                args += ["--ro-bind", "/dev/null", name]
        for name in _MASKED_DIRS:
            if os.path.isdir(name):
                args += ["--tmpfs", name]
        try:
            config_path = config.config_path if config.is_loaded else None
        except Exception:  # no usable config: nothing more to hide
            config_path = None
        if config_path is not None:
            directory = Path(config_path).resolve().parent
            bound = [Path(d) for d in _SYSTEM_DIRS] + self._bind_sources()
            if any(directory.is_relative_to(b) for b in bound):
                args += ["--tmpfs", str(directory)]
        return args

    def _session_masks(self) -> list[str]:
        """An empty read-only tmpfs over the session files (which ``--resume`` restores: not
        for sandboxed code to read or rewrite), after the workspace bind it covers."""
        sessions = self.workspace / PRIVATE_ENTRIES[0]
        if os.path.islink(sessions) or not sessions.is_dir():
            return []  # a link there is refused by the session store itself
        return ["--tmpfs", str(sessions), "--remount-ro", str(sessions)]

    def _tmp_size(self) -> list[str]:
        """``--size`` for the private ``/tmp``: it lives in memory, so it holds at most
        ``memory_limit`` (a tmpfs left unbounded takes half the host's RAM)."""
        size = self.limits.memory_bytes
        if size is None:
            return []
        if not _tmpfs_size_supported(self.bwrap):
            return []
        return ["--size", str(size)]

    def _wrap(
        self, argv: list[str], rlimits: dict[str, int], env: dict[str, str], cwd: str
    ) -> LaunchSpec:
        args = [self.bwrap]
        for name in _SYSTEM_DIRS:
            if os.path.islink(name):
                args += ["--symlink", os.readlink(name), name]
            elif os.path.isdir(name):
                args += ["--ro-bind", name, name]
        # The private /tmp comes before the binds: Python (a venv in a checkout under /tmp,
        # say) and the workspace may live below /tmp, and a later tmpfs would hide them.
        args += ["--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys"]
        args += ["--dev", "/dev", *self._tmp_size(), "--tmpfs", "/tmp"]
        user = self.run_as
        stage: list[tuple[int, str]] = []
        for source in self._bind_sources():
            args += ["--ro-bind", str(source), str(source)]
            stage.append((len(args) - 2, str(source)))
        args += self._masks()
        workspace = str(self.workspace)
        args += ["--bind", workspace, workspace]
        stage.append((len(args) - 2, workspace))
        args += self._session_masks()
        args += [
            "--unshare-user", "--disable-userns",
            "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--hostname", "sandbox",
            "--die-with-parent",
            "--cap-drop", "ALL",
            "--chdir", cwd,
            "--setenv", "HOME", "/tmp",
            "--setenv", "TMPDIR", "/tmp",
        ]  # fmt: skip
        # Always a network namespace of its own: the host's would expose its loopback services.
        args.append("--unshare-net")
        slirp = netns.find_slirp4netns() if self.settings.network_enabled else None
        if slirp is not None:
            args += netns.BWRAP_OPTIONS
        args += ["--", *argv]
        # rlimits are set outside and inherited: bwrap itself needs little.
        root = _stage_root(stage) if user is not None else None
        options = replace(
            self.launch_options(rlimits),
            user=user,
            stage=tuple(stage) if root else (),
            stage_root=root,
            network=slirp,
        )
        # ``stage`` holds indexes into ``args``, the very list the launcher execs.
        return LaunchSpec(argv=launcher_argv(args, options), env=env, cwd="/")


@functools.cache
def _tmpfs_size_supported(bwrap: str) -> bool:
    """Whether ``bwrap`` knows ``--size`` (0.7+); older ones get an unbounded ``/tmp``, warned."""
    try:
        done = subprocess.run(
            [bwrap, "--help"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return False
    if "--size" in done.stdout + done.stderr:
        return True
    logger.warning(
        f"{bwrap} is too old to bound the sandbox's /tmp (no --size option): code may fill it "
        "past memory_limit; install bubblewrap 0.7 or later"
    )
    return False


def _stage_root(stage: list[tuple[int, str]]) -> str | None:
    """A directory to cover with the staging tmpfs: exists, and holds nothing we bind."""
    for root in _STAGE_ROOTS:
        if os.path.isdir(root) and not any(Path(path).is_relative_to(root) for _, path in stage):
            return root
    return None
