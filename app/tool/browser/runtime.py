"""The browser's lifecycle: lazy start, one lock, crash recovery, clean teardown. browser-use
is imported on first use (about a second), off the loop, with telemetry and log hijacking off."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from app.config import BrowserSettings
from app.exceptions import ToolError
from app.install_hint import pip_install
from app.logger import logger
from app.tool.browser.guard import LocalRequestGuard
from app.tool.browser.launcher import ChromiumProcess, find_chromium, private_dir

RESTART_NOTE = (
    "Note: the browser had stopped (it crashed or was closed), so a new browser was started. "
    "Tabs, pages and form input from before are gone."
)

_QUIET_ENV = {
    "ANONYMIZED_TELEMETRY": "false",
    "BROWSER_USE_CLOUD_SYNC": "false",
    "BROWSER_USE_VERSION_CHECK": "false",
    "BROWSER_USE_CLOUD_HINTS": "false",
    "BROWSER_USE_SETUP_LOGGING": "false",
}
_bu: SimpleNamespace | None = None
_USER_CONFIG_DIR = "BROWSER_USE_CONFIG_DIR" in os.environ


def _import_browser_use() -> SimpleNamespace:
    for key, value in _QUIET_ENV.items():
        os.environ.setdefault(key, value)
    # Importing browser-use creates its config directory (~/.config/browseruse by default);
    # point it at a scratch directory for the import and delete that afterwards.
    scratch = Path(tempfile.mkdtemp(prefix="openmanus-browser-use-"))
    if not _USER_CONFIG_DIR:
        os.environ["BROWSER_USE_CONFIG_DIR"] = str(scratch / "config")
    try:
        from browser_use.browser import events
        from browser_use.browser import session as session_module
        from browser_use.browser.profile import BrowserProfile, ProxySettings
        from browser_use.dom.markdown_extractor import extract_clean_markdown
        from browser_use.tools.service import Tools
    except ImportError as e:
        raise ToolError(
            f"The browser is not installed ({e}). Install the extra: {pip_install('browser')}"
        ) from e
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    _route_library_logs()
    # Importing browser-use creates an empty downloads directory in /tmp for its default
    # profile; we never use that profile, so the directory goes again.
    default_downloads = session_module.DEFAULT_BROWSER_PROFILE.downloads_path
    if default_downloads is not None:
        with contextlib.suppress(OSError):
            Path(default_downloads).rmdir()
    return SimpleNamespace(
        BrowserSession=session_module.BrowserSession,
        BrowserProfile=BrowserProfile,
        ProxySettings=ProxySettings,
        Tools=Tools,
        events=events,
        extract_clean_markdown=extract_clean_markdown,
    )


async def load_browser_use() -> SimpleNamespace:
    """browser-use's classes, imported once (off the event loop)."""
    global _bu
    if _bu is None:
        _bu = await asyncio.to_thread(_import_browser_use)
    return _bu


async def _drop_dead_session(session: Any) -> None:
    """Forget a session whose browser is gone, without waiting on browser-use's reconnects."""
    session._intentional_stop = True
    await asyncio.wait_for(session.reset(), 5.0)
    await session.event_bus.stop(clear=True, timeout=2)


class _ToLoguru(logging.Handler):
    """browser-use, cdp-use and bubus log through ``logging``; keep it in our log, at debug."""

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(Exception):
            logger.debug(f"[{record.name}] {record.getMessage()}")


def _route_library_logs() -> None:
    handler = _ToLoguru()
    for name in ("browser_use", "cdp_use", "bubus"):
        library_logger = logging.getLogger(name)
        library_logger.handlers = [handler]
        library_logger.propagate = False


def _headless(settings: BrowserSettings) -> bool:
    if settings.headless is not None:
        return settings.headless
    return not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def _security_args(settings: BrowserSettings) -> list[str]:
    if not settings.disable_security:
        return []
    return [
        "--disable-web-security",
        "--disable-site-isolation-trials",
        "--disable-features=IsolateOrigins,site-per-process",
        "--allow-running-insecure-content",
        "--ignore-certificate-errors",
    ]


class BrowserRuntime:
    """Owns one browser-use ``BrowserSession`` (and the Chromium we launched for it, if any)."""

    def __init__(self, settings: BrowserSettings, *, start_timeout: float = 30.0) -> None:
        self.settings = settings
        self.start_timeout = start_timeout
        self.lock = asyncio.Lock()
        self.session: Any = None
        self.tools: Any = None
        self.chromium: ChromiumProcess | None = None
        #: Fails requests for local addresses inside the browser (see ``guard``).
        self.guard: LocalRequestGuard | None = None
        self._directory: Path | None = None

    def take_blocked(self) -> list[str]:
        """Local addresses the browser refused since the last call."""
        return self.guard.take_blocked() if self.guard is not None else []

    @property
    def started(self) -> bool:
        return self.session is not None

    async def ensure(self) -> str | None:
        """Make sure a live browser is connected; returns a note when it had to be restarted.

        Call with ``self.lock`` held.
        """
        if self.session is not None:
            if await self.is_healthy():
                return None
            logger.warning("The browser stopped responding; starting a new one")
            await self.close(dead=True)
            await self._start()
            return RESTART_NOTE
        await self._start()
        return None

    async def is_healthy(self) -> bool:
        """The process (when ours) is alive and DevTools still answers."""
        if self.session is None:
            return False
        if self.chromium is not None and not self.chromium.is_alive():
            return False
        try:
            client = self.session.cdp_client
            await asyncio.wait_for(client.send.Browser.getVersion(), 5.0)
        except Exception:
            return False
        return True

    async def _start(self) -> None:
        bu = await load_browser_use()
        settings = self.settings
        directory = private_dir()
        self._directory = directory
        if not _USER_CONFIG_DIR:  # browser-use's config dir would go to ~/.config otherwise
            os.environ["BROWSER_USE_CONFIG_DIR"] = str(directory / "browser-use-config")
        try:
            attach_url = settings.cdp_url or settings.wss_url
            if attach_url is None:
                executable = find_chromium(settings.chrome_instance_path)
                args = list(_security_args(settings))
                if settings.proxy is not None:
                    args.append(f"--proxy-server={settings.proxy.server}")
                args += ["--window-size=1280,1000", *settings.extra_chromium_args]
                self.chromium = await ChromiumProcess.launch(
                    executable,
                    directory,
                    headless=_headless(settings),
                    args=args,
                    timeout=self.start_timeout,
                )
                attach_url = self.chromium.cdp_url
                logger.info(f"Started Chromium (pid {self.chromium.pid}) for the browser tool")
            profile_kwargs: dict[str, Any] = {
                # Always explicit: left unset, browser-use makes a directory in /tmp for it.
                "user_data_dir": directory / "profile",
                "headless": _headless(settings),
                "downloads_path": directory / "downloads",
                "enable_default_extensions": False,
                "keep_alive": False,
            }
            if settings.proxy is not None:
                profile_kwargs["proxy"] = bu.ProxySettings(
                    server=settings.proxy.server,
                    username=settings.proxy.username,
                    password=settings.proxy.password,
                )
            session = bu.BrowserSession(
                cdp_url=attach_url, browser_profile=bu.BrowserProfile(**profile_kwargs)
            )
            self.session = session
            await asyncio.wait_for(session.start(), self.start_timeout)
            guard = LocalRequestGuard()
            proxy = settings.proxy
            await asyncio.wait_for(
                guard.install(
                    session.cdp_client,
                    handle_auth=bool(proxy is not None and proxy.username and proxy.password),
                ),
                self.start_timeout,
            )
            self.guard = guard
            self.tools = bu.Tools()
        except BaseException as e:
            await self.close()
            if isinstance(e, ToolError):
                raise
            if isinstance(e, TimeoutError):
                raise ToolError(f"The browser did not start within {self.start_timeout:g} s") from e
            if isinstance(e, Exception):
                target = settings.cdp_url or settings.wss_url or "Chromium"
                raise ToolError(f"Could not start or attach to the browser ({target}): {e}") from e
            raise

    async def close(self, *, dead: bool = False) -> None:
        """Disconnect, kill the Chromium we started and delete its directory. Never raises.

        ``dead``: the browser is known to be gone, so browser-use's reconnect attempts (and
        its goodbye messages) are skipped.
        """
        session, self.session, self.tools = self.session, None, None
        chromium, self.chromium = self.chromium, None
        guard, self.guard = self.guard, None
        if guard is not None:
            await guard.close()
        directory, self._directory = self._directory, None
        if session is not None:
            try:
                if dead or (chromium is not None and not chromium.is_alive()):
                    await _drop_dead_session(session)
                elif chromium is None:
                    # Attached to someone else's browser: disconnect, leave it running.
                    await asyncio.wait_for(session.stop(), 10.0)
                else:
                    await asyncio.wait_for(session.kill(), 10.0)
            except Exception as e:  # a dead browser may make this fail or hang
                logger.debug(f"Closing the browser session failed: {e!r}")
        if chromium is not None:
            await chromium.stop()
        if directory is not None:
            await asyncio.to_thread(shutil.rmtree, directory, True)
