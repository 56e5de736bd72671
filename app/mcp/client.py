"""The MCP client side, below the tools (``app.tool.mcp`` makes the servers' tools ours;
``app.tool.mcp_features`` answers their requests to us): one connection to one MCP server
(stdio, SSE or streamable HTTP), owned by its own task. The SDK is imported only to connect.

The SDK's transports are anyio contexts that must be entered and left in one task (upstream
left them in whichever task called ``disconnect``, and shared them across instances): a small
task per connection opens transport and session, waits to be told to stop, and closes them;
callers use the session from any task. A server that died is restarted on the next call.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import IO, Any, TextIO

from app.config import MCPServerConfig
from app.exceptions import MCPServerError, ToolError
from app.logger import logger

DEFAULT_CONNECT_TIMEOUT = 30.0
DEFAULT_CALL_TIMEOUT = 300.0
_STOP_TIMEOUT = 10.0
_STDERR_TAIL = 1500
_TOOLS_CHANGED = "notifications/tools/list_changed"
_CLOSED = -32000  # the SDK's CONNECTION_CLOSED error code
#: Without ``max_timeout``, progress may extend a call to at most this many times its timeout.
MAX_TIMEOUT_FACTOR = 10.0

#: Receives (progress, total, message) for one call.
ProgressCallback = Callable[[float, float | None, str | None], Awaitable[None]]


class MCPConnectionLost(MCPServerError):
    """The connection broke during a request; the next call reconnects."""


class MCPCallTimeout(MCPServerError):
    """A tool call did not answer within its timeout; the connection is kept."""


class MCPConnection:
    """A live session with one MCP server (reached as ``config`` says), reconnected on demand.
    ``inherit_env`` passes our whole environment to a stdio server (for our own server); else
    it gets the SDK's safe minimum plus ``config.env``. ``features`` answers the server's own
    requests (sampling, elicitation, roots)."""

    def __init__(
        self,
        server_id: str,
        config: MCPServerConfig,
        *,
        features: Any,
        on_tools_changed: Callable[[MCPConnection], None],
        connect_timeout: float,
        call_timeout: float,
        progress_interval: float,
        inherit_env: bool = False,
        cwd: str | None = None,
    ) -> None:
        self.server_id = server_id
        #: Working directory of a stdio server (None: this process's; our own server runs in
        #: "/", outside any workspace: app.tool.mcp).
        self.cwd = cwd
        #: A server may send thousands of progress notifications a second: each call passes
        #: on at most one per this many seconds (the latest; the last one when it ends).
        self.progress_interval = progress_interval
        self.config = config
        self.connect_timeout = connect_timeout
        self.call_timeout = config.timeout or call_timeout
        self.inherit_env = inherit_env
        self.on_tools_changed = on_tools_changed
        self.features = features
        #: The server's recent log messages (``notifications/message``), newest last.
        self.server_log: collections.deque[str] = collections.deque(maxlen=100)
        self.session: Any = None
        self.server_name: str | None = None
        self.tools_changed = False
        self.last_error: str | None = None
        self._runner: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._lock = asyncio.Lock()

    @property
    def connected(self) -> bool:
        return self.session is not None and self._runner is not None and not self._runner.done()

    @property
    def target(self) -> str:
        return target(self.config)

    def __repr__(self) -> str:
        state = "connected" if self.connected else "disconnected"
        return f"MCPConnection({self.server_id!r}, {self.config.type}, {state})"

    async def connect(self) -> None:
        """Open the session if it is not open; raises ``MCPServerError`` saying why not."""
        async with self._lock:
            if self.connected:
                return
            await self._stop_runner()
            loop = asyncio.get_running_loop()
            ready: asyncio.Future[Any] = loop.create_future()
            self._stop = asyncio.Event()
            self._runner = asyncio.create_task(self._run(ready), name=f"mcp:{self.server_id}")
            try:
                async with asyncio.timeout(self.connect_timeout):
                    self.session = await asyncio.shield(ready)
            except TimeoutError:
                await self._stop_runner(graceful=False)
                self.last_error = (
                    f"MCP server '{self.server_id}' ({self.target}) did not complete the "
                    f"handshake within {self.connect_timeout:g} s"
                )
                raise MCPServerError(self.last_error) from None
            except BaseException:
                await self._stop_runner(graceful=False)
                raise
            self.last_error = None
            self.tools_changed = False
            logger.debug(f"MCP server '{self.server_id}' connected ({self.target})")

    async def close(self) -> None:
        """End the session and, for stdio, the server process. Safe to call repeatedly."""
        await self._stop_runner()

    async def _stop_runner(self, *, graceful: bool = True) -> None:
        """Stop the connection task: politely (it leaves its contexts), or by cancelling it
        when it is stuck before the session was established."""
        runner, self._runner = self._runner, None
        self.session = None
        if runner is None or runner.done():
            if runner is not None and not runner.cancelled():
                runner.exception()  # consumed: failures were reported through ``ready``
            return
        if not graceful:
            runner.cancel()
        elif self._stop is not None:
            self._stop.set()
        try:
            done, _ = await asyncio.wait({runner}, timeout=_STOP_TIMEOUT)
            if not done:
                runner.cancel()
                await asyncio.wait({runner}, timeout=_STOP_TIMEOUT)
        except asyncio.CancelledError:
            # We are being cancelled ourselves: still make sure the server goes away.
            runner.cancel()
            raise
        if runner.done() and not runner.cancelled() and runner.exception() is not None:
            error = runner.exception()
            logger.debug(f"MCP server '{self.server_id}' closed with {type(error).__name__}")

    async def _run(self, ready: asyncio.Future[Any]) -> None:
        """The task that owns the transport and the session for their whole life."""
        errlog: TextIO | None = None
        if self.config.type == "stdio":
            errlog = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")
        try:
            from mcp import Implementation
            from mcp.client import Client

            async with Client(
                self._transport(errlog),
                mode="legacy",  # the initialize handshake every server understands
                cache=None,  # a refresh must reach the server
                message_handler=self._on_message,
                client_info=Implementation(name="openmanus", version="0.1.0"),
                **self._callbacks(),
            ) as client:
                self.server_name = getattr(client.server_info, "name", None)
                if not ready.done():
                    ready.set_result(client.session)
                assert self._stop is not None
                await self._stop.wait()
        except (KeyboardInterrupt, SystemExit):
            raise
        except asyncio.CancelledError:
            if not ready.done():
                ready.cancel()
            raise
        except BaseException as e:
            self.last_error = self._describe_failure(e, errlog)
            if ready.done():
                logger.warning(self.last_error)
            else:
                ready.set_exception(MCPServerError(self.last_error))
        finally:
            self.session = None
            if errlog is not None:
                errlog.close()

    def _callbacks(self) -> dict[str, Any]:
        """The SDK callbacks for the server's requests to us (declares the capabilities)."""
        features = self.features
        return {
            "logging_callback": self._on_log,
            "sampling_callback": lambda context, params: features.sample(
                self.server_id, self.config.sampling, params
            ),
            "elicitation_callback": lambda context, params: features.elicit(self.server_id, params),
            "list_roots_callback": features.list_roots,
        }

    async def _on_log(self, params: Any) -> None:
        data = params.data
        text = data if isinstance(data, str) else repr(data)
        logger.debug(f"MCP server '{self.server_id}' [{params.level}]: {text[:500]}")
        self.server_log.append(text)

    async def notify_roots_changed(self) -> None:
        """Tell a connected server that our roots (the workspace) changed."""
        if not self.connected:
            return
        try:
            await self.session.send_roots_list_changed()
        except Exception as e:  # the server may be gone; the next call notices
            logger.debug(f"MCP server '{self.server_id}': roots notification failed: {e}")

    def _transport(self, errlog: TextIO | None) -> contextlib.AbstractAsyncContextManager[Any]:
        cfg = self.config
        if cfg.type == "stdio":
            from mcp import StdioServerParameters
            from mcp.client.stdio import get_default_environment, stdio_client

            base = dict(os.environ) if self.inherit_env else get_default_environment()
            params = StdioServerParameters(
                command=cfg.command or "",
                args=list(cfg.args),
                env={**base, **(cfg.env or {})},
                cwd=self.cwd,
            )
            return stdio_client(params, errlog=errlog if errlog is not None else sys.stderr)
        if cfg.type == "sse":
            from mcp.client.sse import sse_client

            return sse_client(cfg.url or "", headers=dict(cfg.headers) or None)
        return _http_transport(cfg.url or "", dict(cfg.headers))

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, Exception):
            logger.debug(f"MCP server '{self.server_id}': {type(message).__name__}: {message}")
            return
        root = getattr(message, "root", None)
        method = getattr(message, "method", None) or getattr(root, "method", None)
        if method == _TOOLS_CHANGED:
            self.tools_changed = True
            self.on_tools_changed(self)

    async def list_tools(self) -> list[Any]:
        """Every tool the server offers (all pages); connects first if needed."""
        from mcp import types

        await self.connect()
        tools: list[Any] = []
        cursor: str | None = None
        while True:
            params = types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
            request = self.session.list_tools(params=params)
            result = await self._request(request, "tools/list", self.call_timeout)
            tools.extend(result.tools)
            cursor = getattr(result, "next_cursor", None)
            if not cursor:
                break
        self.tools_changed = False
        return tools

    @property
    def max_timeout(self) -> float:
        """The most one call may take, however often the server reports progress."""
        return self.config.max_timeout or self.call_timeout * MAX_TIMEOUT_FACTOR

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None,
        timeout: float | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> Any:
        """``tools/call`` on the server, under an inactivity ``timeout`` that each progress
        notification pushes back, never past ``max_timeout`` in all. Progress reaches
        ``on_progress`` coalesced: at most one report per ``progress_interval``, the latest,
        and the last one at the end. Raises ``MCPServerError`` (unreachable or lost),
        ``MCPCallTimeout``, or ``ToolError`` for a protocol-level error from the server."""
        await self.connect()
        limit = timeout or self.call_timeout
        loop = asyncio.get_running_loop()
        total_limit = max(limit, self.max_timeout)
        hard_deadline = loop.time() + total_limit
        window: asyncio.Timeout | None = None
        interval = self.progress_interval
        last_sent = -float("inf")
        pending: tuple[float, float | None, str | None] | None = None

        async def deliver(report: tuple[float, float | None, str | None]) -> None:
            nonlocal last_sent
            last_sent = loop.time()
            if on_progress is None:
                return
            try:
                await on_progress(*report)
            except Exception as e:  # a display problem must not break the call
                logger.debug(f"Progress callback failed: {e}")

        async def progress(value: float, total: float | None, message: str | None) -> None:
            nonlocal pending
            if window is not None and not window.expired():
                window.reschedule(min(loop.time() + limit, hard_deadline))
            if loop.time() - last_sent >= interval:
                pending = None
                await deliver((value, total, message))
            else:
                pending = (value, total, message)  # only the latest is kept

        # No SDK timeout: ours is the one that progress extends (the SDK's is fixed).
        request = self.session.call_tool(name, arguments or {}, progress_callback=progress)
        try:
            async with asyncio.timeout(limit) as window:
                result = await self._request(request, f"'{name}'", None)
            # Notifications sent before the result (e.g. tools/list_changed) are handled in
            # tasks the SDK already scheduled; let them run so callers see their effect at once.
            await asyncio.sleep(0)
            return result
        except asyncio.CancelledError:
            pending = None  # nobody waits for the call any more
            raise
        except TimeoutError:
            if window is None or not window.expired():
                raise
            if loop.time() >= hard_deadline - 0.05:
                raise MCPCallTimeout(
                    f"MCP server '{self.server_id}' did not finish '{name}' within "
                    f"{total_limit:g} s in all (its max_timeout), although "
                    "it kept reporting progress"
                ) from None
            raise MCPCallTimeout(
                f"MCP server '{self.server_id}' did not answer '{name}' within {limit:g} s"
            ) from None
        finally:
            if pending is not None:
                report, pending = pending, None
                await deliver(report)

    async def _request(self, request: Any, what: str, limit: float | None) -> Any:
        from mcp.shared.exceptions import MCPError
        from mcp.types import CONNECTION_CLOSED

        try:
            # No SDK read timeout is set: a request past ``limit`` (+5 s) means a stuck transport.
            async with asyncio.timeout(None if limit is None else limit + 5):
                return await request
        except MCPError as e:
            if e.code == CONNECTION_CLOSED:
                raise await self._lost(what, e) from e
            raise ToolError(f"MCP server '{self.server_id}' rejected {what}: {e.message}") from e
        except (TimeoutError, OSError) as e:
            raise await self._lost(what, e) from e
        except _closed_errors() as e:
            raise await self._lost(what, e) from e

    async def _lost(self, what: str, cause: BaseException) -> MCPConnectionLost:
        detail = self.last_error or f"{type(cause).__name__}: {cause}"
        await self._stop_runner()
        restart = "restarted" if self.config.type == "stdio" else "reconnected"
        self.last_error = (
            f"MCP server '{self.server_id}' ({self.target}): the connection was lost during "
            f"{what} ({detail}); it will be {restart} on the next call"
        )
        logger.warning(self.last_error)
        return MCPConnectionLost(self.last_error)

    def _describe_failure(self, error: BaseException, errlog: IO[str] | None) -> str:
        cause = _root_cause(error)
        kind = self.config.type
        if isinstance(cause, FileNotFoundError) and kind == "stdio":
            reason = f"command not found: {self.config.command!r}"
        elif isinstance(cause, PermissionError) and kind == "stdio":
            reason = f"command not executable: {self.config.command!r}"
        elif isinstance(cause, _closed_errors()) or getattr(cause, "code", None) == _CLOSED:
            reason = (
                "the server process exited or closed its output before answering"
                if kind == "stdio"
                else "the server closed the connection"
            )
        else:
            reason = f"{type(cause).__name__}: {cause}" if str(cause) else type(cause).__name__
        message = f"MCP server '{self.server_id}' ({self.target}) could not be used: {reason}"
        tail = _tail(errlog)
        if tail:
            message += f"\n--- its stderr ends with ---\n{tail}"
        return message


@contextlib.asynccontextmanager
async def _http_transport(url: str, headers: dict[str, str]) -> AsyncIterator[Any]:
    """Streamable HTTP, with our headers on an HTTP client the transport closes for us."""
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async with create_mcp_http_client(headers=headers or None) as client:
        async with streamable_http_client(url, http_client=client) as streams:
            yield streams


def target(config: MCPServerConfig) -> str:
    """What a server config reaches, for messages: the command line or the URL."""
    if config.type == "stdio":
        return " ".join([config.command or "", *config.args]).strip()
    return config.url or ""


def _closed_errors() -> tuple[type[BaseException], ...]:
    """What a transport raises when its connection went away."""
    import anyio

    return (
        EOFError,
        BrokenPipeError,
        ConnectionResetError,
        anyio.ClosedResourceError,
        anyio.BrokenResourceError,
        anyio.EndOfStream,
    )


def _root_cause(error: BaseException) -> BaseException:
    """The first real error inside (possibly nested) exception groups."""
    while isinstance(error, BaseExceptionGroup):
        inner = [e for e in error.exceptions if not isinstance(e, asyncio.CancelledError)]
        error = (inner or list(error.exceptions))[0]
    return error


def _tail(errlog: IO[str] | None) -> str:
    if errlog is None:
        return ""
    try:
        errlog.flush()
        errlog.seek(0)
        text = errlog.read()
    except (OSError, ValueError):
        return ""
    return text.strip()[-_STDERR_TAIL:]
