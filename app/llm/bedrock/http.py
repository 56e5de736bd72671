"""The HTTP client Bedrock requests go through: httpx2's (the project's client), one per event
loop (a connection pool cannot outlive its loop), with the proxy settings of the environment.
Everything is async: a cancelled request closes its connection, so Bedrock stops generating
an answer nobody will read."""

from __future__ import annotations

import asyncio
from typing import Any

#: Connecting is quick or not at all; the request's own timeout covers the rest.
CONNECT_TIMEOUT = 30.0


class HttpClients:
    """httpx2's ``AsyncClient`` for the running loop, made on first use (httpx2 is imported
    off the loop before the first request)."""

    def __init__(self, max_connections: int) -> None:
        self.max_connections = max_connections
        self._client: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def client(self) -> Any:
        import httpx2

        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            limits = httpx2.Limits(
                max_connections=self.max_connections,
                max_keepalive_connections=min(self.max_connections, 20),
            )
            self._client = httpx2.AsyncClient(limits=limits, follow_redirects=False)
            self._loop = loop
        return self._client

    @staticmethod
    def timeout(seconds: float) -> Any:
        """A request's timeout: ``seconds`` for each read (a stream's silence) and write."""
        import httpx2

        return httpx2.Timeout(seconds, connect=min(seconds, CONNECT_TIMEOUT))

    @property
    def connected(self) -> bool:
        return self._client is not None

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None and self._loop is asyncio.get_running_loop():
            await client.aclose()
