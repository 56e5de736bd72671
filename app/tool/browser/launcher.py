"""Starting our own Chromium: found automatically, confined to one private directory.

We launch Chromium ourselves (instead of letting browser-use do it) so that we own its process
group and its files: profile, downloads, temp files, even ``$HOME`` (Chromium writes
``~/.pki`` and ``~/.cache``) all live under one directory that ``stop()`` deletes, and the
whole process group (renderers, zygote, GPU process) is killed with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

from app.exceptions import ToolError
from app.tool._process import terminate_group

__all__ = ["CANDIDATE_BROWSERS", "ChromiumProcess", "find_chromium", "private_dir", "quiet_args"]

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
    """A new directory only this browser uses; everything it writes goes below it."""
    return Path(tempfile.mkdtemp(prefix=_PRIVATE_PREFIX))


def quiet_args() -> list[str]:
    """Flags that keep Chromium from phoning home or nagging (and flooding a closed network)."""
    return [
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
    ]


class ChromiumProcess:
    """One Chromium we started: its process group, its DevTools URL and its directory."""

    def __init__(self, process: asyncio.subprocess.Process, directory: Path, cdp_url: str) -> None:
        self.process = process
        self.directory = directory
        self.cdp_url = cdp_url

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
        for path in (profile, home, tmp):
            path.mkdir(parents=True, exist_ok=True)
        cmd = [
            executable,
            f"--user-data-dir={profile}",
            "--remote-debugging-port=0",
            "--remote-debugging-address=127.0.0.1",
            *quiet_args(),
        ]
        if headless:
            cmd += ["--headless=new", "--hide-scrollbars", "--mute-audio"]
        if sys.platform.startswith("linux") and os.geteuid() == 0:
            cmd.append("--no-sandbox")  # Chromium refuses to run as root with its sandbox
        cmd += [*args, "about:blank"]
        env = {
            **os.environ,
            "HOME": str(home),
            "TMPDIR": str(tmp),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_CACHE_HOME": str(home / ".cache"),
        }
        log_path = directory / "chromium.log"
        log = await asyncio.to_thread(open, log_path, "wb")
        with log:
            process = await asyncio.create_subprocess_exec(
                *cmd,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=env,
                start_new_session=True,
            )
        launched = cls(process, directory, "")
        try:
            launched.cdp_url = await _wait_for_devtools(process, profile, log_path, timeout)
        except BaseException:
            await launched.stop(remove_directory=False)
            raise
        return launched

    async def stop(self, *, remove_directory: bool = True) -> None:
        """Kill the whole process group and delete the private directory."""
        leader_exited = asyncio.Event()
        if self.process.returncode is not None:
            leader_exited.set()

        async def wait_leader() -> None:
            with contextlib.suppress(Exception):
                await self.process.wait()
            leader_exited.set()

        waiter = asyncio.create_task(wait_leader())
        try:
            await terminate_group(self.process.pid, leader_exited, grace=2.0)
        except ProcessLookupError:
            pass
        finally:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(waiter, 2.0)
            waiter.cancel()
        if remove_directory:
            await asyncio.to_thread(shutil.rmtree, self.directory, True)

    def kill_now(self) -> None:
        """SIGKILL the group at once (used when the event loop is going away)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)


async def _wait_for_devtools(
    process: asyncio.subprocess.Process, profile: Path, log_path: Path, timeout: float
) -> str:
    """Chromium writes the port it picked to ``DevToolsActivePort`` once DevTools listens."""
    port_file = profile / "DevToolsActivePort"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.returncode is not None:
            raise ToolError(
                f"Chromium exited while starting ({process.returncode}): {_log_tail(log_path)}"
            )
        with contextlib.suppress(OSError, ValueError, IndexError):
            first_line = port_file.read_text().splitlines()[0]
            return f"http://127.0.0.1:{int(first_line)}"
        await asyncio.sleep(0.05)
    raise ToolError(
        f"Chromium did not open its DevTools port within {timeout:g} s: {_log_tail(log_path)}"
    )


def _log_tail(path: Path, limit: int = 600) -> str:
    try:
        text = path.read_text(errors="replace").strip()
    except OSError:
        return "(no log)"
    return text[-limit:] or "(no output)"
