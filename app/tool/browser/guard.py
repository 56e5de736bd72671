"""Local addresses refused inside the browser for every page, frame and request (``file:``,
this program's own servers), through CDP's ``Fetch`` domain; ``urls.check_url`` covers what
the model asks for, this what a page does on its own (docs/sandbox.md)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from app import own_servers
from app.logger import logger
from app.tool.browser.urls import is_blocked, own_server, own_server_resolved

#: What the browser pauses for us: every spelling reaches here canonical (lower-case scheme).
BLOCKED_PATTERNS: tuple[dict[str, str], ...] = (
    {"urlPattern": "file:*"},
    {"urlPattern": "filesystem:*"},
)
_KEEP = 20


def request_patterns() -> list[dict[str, str]]:
    """``BLOCKED_PATTERNS`` plus every request to the port of one of our servers (the URL
    the browser reports is canonical, so ``host:port/`` is always spelled that way)."""
    patterns = list(BLOCKED_PATTERNS)
    for port in sorted(own_servers.ports()):
        patterns.append({"urlPattern": f"*:{port}/*"})
        if port in (80, 443):  # a default port is left out of the URL
            patterns.append({"urlPattern": ("http" if port == 80 else "https") + "://*"})
    return patterns


class LocalRequestGuard:
    """Fails the browser's requests for local addresses and remembers what it refused."""

    def __init__(self) -> None:
        self._client: Any = None
        self._blocked: list[str] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._handle_auth = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._unsubscribe: Any = None

    async def install(self, client: Any, *, handle_auth: bool = False) -> None:
        """Intercept on ``client`` (browser-use's root CDP client). ``handle_auth`` keeps
        browser-use's proxy authentication working, which enables ``Fetch`` too."""
        self._client = client
        # One callback per event on a client: ours also lets every other paused request go
        # on (browser-use's proxy-auth setup pauses all of them and did the same).
        client.register.Fetch.requestPaused(self._on_paused)
        self._handle_auth = handle_auth
        self._loop = asyncio.get_running_loop()
        # Subscribed first: a server that starts meanwhile is not missed.
        self._unsubscribe = own_servers.subscribe(self._servers_changed)
        try:
            await self._enable()
        except BaseException:
            await self.close()
            raise

    async def _enable(self) -> None:
        """(Re)send the patterns: ``Fetch.enable`` replaces the previous ones."""
        client = self._client
        if client is None:
            return
        params: dict[str, Any] = {"patterns": request_patterns()}
        if self._handle_auth:
            params["handleAuthRequests"] = True
        await client.send.Fetch.enable(params=params)

    def _servers_changed(self) -> None:
        """A server of ours started or stopped (in any thread): watch its port too."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        loop.call_soon_threadsafe(lambda: self._spawn(self._reenable()))

    async def _reenable(self) -> None:
        try:
            await self._enable()
        except Exception as e:  # the browser went away meanwhile
            logger.debug(f"Could not update the browser's request patterns: {e!r}")

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def take_blocked(self) -> list[str]:
        """Addresses refused since the last call (the most recent ``_KEEP``)."""
        blocked, self._blocked = self._blocked, []
        return blocked

    def _on_paused(self, event: Any, session_id: str | None) -> None:
        # Never await here: cdp-use runs this inside its reader, which must stay free to
        # deliver the reply to our failRequest.
        self._spawn(self._decide(event, session_id))

    async def _decide(self, event: Any, session_id: str | None) -> None:
        client = self._client
        request_id = event.get("requestId")
        url = str((event.get("request") or {}).get("url", ""))
        try:
            local = is_blocked(url)
            ours = None if local else await own_server_resolved(url)
            if local or ours is not None:
                self._blocked = [*self._blocked, url[:300]][-_KEEP:]
                what = f"this program's own {ours.label}" if ours else "a local address"
                logger.warning(f"The browser refused a request for {what}: {url[:200]}")
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
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        self._loop = None
        for task in list(self._tasks):
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        self._client = None


def blocked_note(urls: list[str]) -> str | None:
    """The text telling the model what the browser refused, or None."""
    if not urls:
        return None
    unique = list(dict.fromkeys(urls))
    local = [u for u in unique if is_blocked(u)]
    ours = [u for u in unique if u not in local]
    notes = []
    if local:
        notes.append(
            "Blocked: the page tried to open local addresses, which the browser refused: "
            f"{', '.join(local)}. Only web pages (http, https) can be opened."
        )
    if ours:
        labels = sorted({s.label for u in ours if (s := own_server(u)) is not None}) or [
            "web UI or MCP server"
        ]
        notes.append(
            f"Blocked: the page tried to reach {', '.join(ours)}: this program's own "
            f"{' and '.join(labels)}; the browser may not open it."
        )
    return "\n".join(notes)
