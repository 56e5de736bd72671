"""Starting our own Chromium, so we own its process group and its files: everything it writes
lives under one private directory that ``stop()`` deletes. As root it runs as an unprivileged
user, always with its own sandbox, DevTools on a pipe (docs/sandbox.md says why)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import pwd
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from app.exceptions import ToolError
from app.sandbox.environment import scrub_environment
from app.sandbox.processes import terminate_group
from app.tool.browser.devtools_pipe import PipeRelay

#: Names and paths tried, in order, when ``chrome_instance_path`` is not set.
CANDIDATE_BROWSERS: tuple[str, ...] = (
    "chromium",
    "chromium-browser",
    "google-chrome",
    "google-chrome-stable",
    "chrome",
    "/usr/bin/chromium",
    "/usr/lib/chromium/chromium",
    "/snap/bin/chromium",
    "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome",
    "/Applications/Chromium.app/Contents/MacOS/Chromium",
)

_PRIVATE_PREFIX = "openmanus-browser-"
#: The system user Chromium runs as when the agent is root (scripts/setup-chromium.sh makes it).
BROWSER_USER = "openmanus-browser"
#: Its fallback when that user does not exist.
_NOBODY = (65534, 65534)
#: Subdirectories of the private directory Chromium writes to.
_SUBDIRS = ("profile", "h", "t", "downloads")


def browser_user() -> tuple[int, int] | None:
    """(uid, gid) Chromium runs as: None when the agent is not root (it runs as the agent)."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam(BROWSER_USER)
    except KeyError:
        return _NOBODY
    if entry.pw_uid == 0 or entry.pw_gid == 0:
        return _NOBODY  # a misconfigured account must not bring root back
    return (entry.pw_uid, entry.pw_gid)


def find_chromium(configured: str | None = None) -> str:
    """The browser binary: ``configured`` if given (it must exist), else the first one found."""
    if configured:
        path = shutil.which(configured) or (configured if os.access(configured, os.X_OK) else None)
        if path is None:
            raise ToolError(
                f"[browser] chrome_instance_path {configured!r} is not an executable file. "
                "Fix the path or remove the key to find Chromium automatically."
            )
        return path
    for candidate in CANDIDATE_BROWSERS:
        path = shutil.which(candidate)
        if path:
            return path
    raise ToolError(
        "No Chromium or Chrome was found. Install one (Debian/Ubuntu: apt-get install chromium) "
        "or set [browser] chrome_instance_path, or attach to a running browser with cdp_url."
    )


def private_dir() -> Path:
    """A new directory only this browser uses; everything it writes goes below it.

    In the temp dir, unless Chromium will run as another user who cannot get there (a
    ``TMPDIR`` inside a closed directory): then in ``/tmp``.
    """
    directory = Path(tempfile.mkdtemp(prefix=_PRIVATE_PREFIX))
    if browser_user() is None or _traversable_by_others(directory.parent):
        return directory
    directory.rmdir()
    fallback = Path("/tmp")
    if not _traversable_by_others(fallback):
        raise ToolError(
            f"Chromium runs as the unprivileged user {BROWSER_USER!r} (or nobody), which cannot "
            f"reach the temp dir {directory.parent} or /tmp; point TMPDIR at a directory "
            "others can traverse"
        )
    return Path(tempfile.mkdtemp(prefix=_PRIVATE_PREFIX, dir=fallback))


def _traversable_by_others(directory: Path) -> bool:
    """Every directory from / down to ``directory`` lets any user pass (``o+x``)."""
    for path in (directory, *directory.parents):
        try:
            if not os.stat(path).st_mode & 0o001:
                return False
        except OSError:
            return False
    return True


#: Flags that keep Chromium from phoning home or nagging (and flooding a closed network).
QUIET_ARGS = (
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-breakpad",
    "--disable-crash-reporter",
    "--metrics-recording-only",
    "--password-store=basic",
    "--use-mock-keychain",
    "--disable-dev-shm-usage",
)


class ChromiumProcess:
    """One Chromium we started: its process group, its DevTools URL and its directory."""

    def __init__(
        self,
        process: asyncio.subprocess.Process,
        directory: Path,
        cdp_url: str,
        relay: PipeRelay | None = None,
    ) -> None:
        self.process = process
        self.directory = directory
        self.cdp_url = cdp_url
        #: Serves DevTools (a pipe to Chromium) at ``cdp_url``; see ``devtools_pipe``.
        self.relay = relay

    @property
    def pid(self) -> int:
        return self.process.pid

    def is_alive(self) -> bool:
        """False once the main process has exited (a zombie counts as exited)."""
        if self.process.returncode is not None:
            return False
        try:
            stat = Path(f"/proc/{self.process.pid}/stat").read_text()
        except FileNotFoundError:
            return False
        except OSError:  # no /proc (macOS): ask the kernel instead
            try:
                os.kill(self.process.pid, 0)
            except ProcessLookupError:
                return False
            return True
        return stat.rsplit(")", 1)[-1].split()[0] != "Z"

    @classmethod
    async def launch(
        cls,
        executable: str,
        directory: Path,
        *,
        headless: bool,
        args: list[str],
        timeout: float,
    ) -> ChromiumProcess:
        """Start Chromium and wait until its DevTools endpoint is up (or fail clearly)."""
        # Short names: Chromium's singleton socket lives under TMPDIR and a Unix socket path
        # must stay under 108 bytes.
        profile = directory / "profile"
        home = directory / "h"
        tmp = directory / "t"
        user = browser_user()
        for path in (directory, *(directory / name for name in _SUBDIRS)):
            path.mkdir(parents=True, exist_ok=True)
            if user is not None:
                os.chown(path, *user)
        # DevTools over a pipe (fds 3 and 4), never a TCP port: ``devtools_pipe``. The shell
        # only moves the pipe to those descriptors, then becomes Chromium.
        cmd = [
            "/bin/sh",
            "-c",
            'exec 3<&0 4>&1 0</dev/null 1>&2 && exec "$0" "$@"',
            executable,
            f"--user-data-dir={profile}",
            "--remote-debugging-pipe",
            *QUIET_ARGS,
        ]
        if headless:
            cmd += ["--headless=new", "--hide-scrollbars", "--mute-audio"]
        cmd += [*args, "about:blank"]
        env = {
            **scrub_environment(),
            "HOME": str(home),
            "TMPDIR": str(tmp),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_CACHE_HOME": str(home / ".cache"),
        }
        log_path = directory / "chromium.log"
        commands_r, commands_w = os.pipe()  # to Chromium's fd 3
        replies_r, replies_w = os.pipe()  # from Chromium's fd 4
        try:
            log = await asyncio.to_thread(open, log_path, "wb")
            with log:
                process = await asyncio.create_subprocess_exec(
                    *cmd,
                    stdin=commands_r,
                    stdout=replies_w,
                    stderr=log,
                    env=env,
                    start_new_session=True,
                    **_drop_to(user),
                )
        except BaseException:
            for fd in (commands_w, replies_r):
                os.close(fd)
            raise
        finally:
            for fd in (commands_r, replies_w):
                os.close(fd)
        relay = PipeRelay(replies_r, commands_w)
        launched = cls(process, directory, "", relay)
        try:
            launched.cdp_url = await relay.start()
            await _wait_for_devtools(process, relay, log_path, timeout)
        except BaseException:
            await launched.stop(remove_directory=False)
            raise
        return launched

    async def stop(self, *, remove_directory: bool = True) -> None:
        """Kill the whole process group, close DevTools and delete the private directory."""
        if self.relay is not None:
            await self.relay.close()
        leader_exited = asyncio.Event()
        waiter = asyncio.ensure_future(self.process.wait())
        waiter.add_done_callback(lambda _: leader_exited.set())
        try:
            await terminate_group(self.process.pid, leader_exited, grace=2.0)
        finally:
            with contextlib.suppress(Exception):  # not reaped within 2 s: given up
                await asyncio.wait_for(waiter, 2.0)
        if remove_directory:
            await asyncio.to_thread(shutil.rmtree, self.directory, True)


def _drop_to(user: tuple[int, int] | None) -> dict[str, Any]:
    """``subprocess`` arguments that start Chromium as ``user`` with no extra groups."""
    if user is None:
        return {}
    return {"user": user[0], "group": user[1], "extra_groups": []}


async def _wait_for_devtools(
    process: asyncio.subprocess.Process, relay: PipeRelay, log_path: Path, timeout: float
) -> None:
    """Chromium answers the relay's probe once DevTools works (or exits, or takes too long)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.returncode is not None or relay.gone.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(process.wait(), 2.0)
            raise ToolError(
                f"Chromium exited while starting ({process.returncode}): "
                + _log_tail(log_path, sandbox_hint=True)
            )
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(relay.answered.wait(), 0.05)
            return
    raise ToolError(
        f"Chromium did not answer on its DevTools pipe within {timeout:g} s: {_log_tail(log_path)}"
    )


def _log_tail(path: Path, *, sandbox_hint: bool = False) -> str:
    """The end of Chromium's log; with ``sandbox_hint``, what to fix when Chromium could not
    start its sandbox (never ``--no-sandbox``)."""
    try:
        text = path.read_text(errors="replace").strip()
    except OSError:
        return "(no log)"
    tail = text[-600:] or "(no output)"
    if sandbox_hint and "sandbox" in text.lower():
        tail += (
            ". Chromium needs its sandbox: allow unprivileged user namespaces (sysctl "
            "kernel.unprivileged_userns_clone=1 / user.max_user_namespaces) or install its "
            "setuid chrome-sandbox helper"
        )
    return tail
