"""Local addresses refused inside the browser itself, for every page, frame and request.

``urls.check_url`` refuses ``file:`` URLs the model asks for, and the tool leaves a local
page after each action; this guard closes what a page could do on its own in between: an
``<iframe src="file://...">``, ``fetch("file://...")``, a script setting ``location``. It
uses CDP's ``Fetch`` domain on the browser target (so it covers every tab, popup and frame,
including ones opened later): requests for ``file:`` and ``filesystem:`` addresses are paused
and failed with ``BlockedByClient`` before anything is read from disk. Chromium already
refuses most of these while web security is on; the guard is what still holds with
``disable_security = true`` (checked against headless Chromium in tests/test_browser_tool.py).

A managed-policy ``URLBlocklist`` would do the same, but Chromium on Linux reads policies
only from ``/etc/chromium/policies``, shared by every Chromium on the host, so it is not used.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from app.logger import logger
from app.tool.browser.urls import is_blocked

__all__ = ["BLOCKED_PATTERNS", "LocalRequestGuard", "blocked_note"]

#: What the browser pauses for us: every spelling reaches here canonical (lower-case scheme).
BLOCKED_PATTERNS: tuple[dict[str, str], ...] = (
    {"urlPattern": "file:*"},
    {"urlPattern": "filesystem:*"},
)
_KEEP = 20


class LocalRequestGuard:
    """Fails the browser's requests for local addresses and remembers what it refused."""

    def __init__(self) -> None:
        self._client: Any = None
        self._blocked: list[str] = []
        self._tasks: set[asyncio.Task[None]] = set()

    async def install(self, client: Any, *, handle_auth: bool = False) -> None:
        """Intercept on ``client`` (browser-use's root CDP client). ``handle_auth`` keeps
        browser-use's proxy authentication working, which enables ``Fetch`` too."""
        self._client = client
        # One callback per event on a client: ours also lets every other paused request go
        # on (browser-use's proxy-auth setup pauses all of them and did the same).
        client.register.Fetch.requestPaused(self._on_paused)
        params: dict[str, Any] = {"patterns": list(BLOCKED_PATTERNS)}
        if handle_auth:
            params["handleAuthRequests"] = True
        await client.send.Fetch.enable(params=params)

    def take_blocked(self) -> list[str]:
        """Addresses refused since the last call (the most recent ``_KEEP``)."""
        blocked, self._blocked = self._blocked, []
        return blocked

    def _on_paused(self, event: Any, session_id: str | None) -> None:
        # Never await here: cdp-use runs this inside its reader, which must stay free to
        # deliver the reply to our failRequest.
        task = asyncio.get_running_loop().create_task(self._decide(event, session_id))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _decide(self, event: Any, session_id: str | None) -> None:
        client = self._client
        request_id = event.get("requestId")
        url = str((event.get("request") or {}).get("url", ""))
        try:
            if is_blocked(url):
                self._blocked = [*self._blocked, url[:300]][-_KEEP:]
                logger.warning(f"The browser refused a request for a local address: {url[:200]}")
                await client.send.Fetch.failRequest(
                    params={"requestId": request_id, "errorReason": "BlockedByClient"},
                    session_id=session_id,
                )
            else:
                await client.send.Fetch.continueRequest(
                    params={"requestId": request_id}, session_id=session_id
                )
        except Exception as e:  # the page or browser went away meanwhile
            logger.debug(f"Could not answer a paused request ({url[:100]}): {e!r}")

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        self._client = None


def blocked_note(urls: list[str]) -> str | None:
    """The text telling the model what the browser refused, or None."""
    if not urls:
        return None
    shown = ", ".join(dict.fromkeys(urls))
    return (
        f"Blocked: the page tried to open local addresses, which the browser refused: {shown}. "
        "Only web pages (http, https) can be opened."
    )
