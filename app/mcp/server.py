"""Our tools served over MCP: ``python -m app.mcp.server [--transport stdio|sse|http]``.

``bash``, ``python_execute``, ``str_replace_editor``, ``browser_use`` (with the ``browser``
extra) and ``terminate``, with exactly the JSON schemas the agents use in-process (upstream
rebuilt them from signatures and lost enums and nested types); ``--run-task`` adds ``run_task``.
HTTP binds 127.0.0.1 unless ``--allow-remote``: these tools run arbitrary code. Each HTTP or SSE
client session gets its own tools (``app.mcp.sessions``). Options: docs/mcp.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import socket
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app import __version__, own_servers
from app.agent.manus import browser_tool_or_notice
from app.config import config, find_config_path
from app.exceptions import ConfigError
from app.logger import define_log_level, logger
from app.mcp.run_task import RunTask
from app.mcp.sessions import SSE_CONNECTION, ToolSessions, session_key
from app.redaction import redact_text, redact_tree
from app.sandbox.factory import create_sandbox
from app.tool.ask_human import CallbackInputProvider, set_input_provider
from app.tool.base import BaseTool, ToolResult, format_output, result_failed
from app.tool.bash import Bash
from app.tool.python_execute import PythonExecute
from app.tool.str_replace_editor import StrReplaceEditor
from app.tool.terminate import Terminate
from app.tool.tool_collection import ToolCollection

if TYPE_CHECKING:
    import uvicorn

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
_TRANSPORTS = {"stdio": "stdio", "sse": "sse", "http": "http", "streamable-http": "http"}
#: What the tools read from the config file. Without ``--run-task`` nothing needs a model, so
#: ``[llm]`` (and its ``${OPENAI_API_KEY}``, often unset in a client-started server) is not read.
TOOL_SECTIONS = frozenset({"workspace_root", "sandbox", "browser", "search", "limits"})


class MCPServer:
    """An MCP server named ``name`` offering ``tools`` (by default our standard set, fresh for
    every client session; tools passed in are shared). ``session_idle_timeout`` (seconds, None
    = never) ends HTTP sessions unused that long, and their tools with them."""

    def __init__(
        self,
        name: str = "openmanus",
        *,
        tools: list[BaseTool] | None = None,
        workspace: Path | None = None,
        run_task: bool = False,
        session_idle_timeout: float | None = 3600.0,
    ) -> None:
        self.name = name
        chosen = tools if tools is not None else self.default_tools(workspace, run_task=run_task)
        self.tools = ToolCollection(*chosen)
        self._extra: list[BaseTool] = []

        def fresh_tools() -> list[BaseTool]:
            return [*self.default_tools(workspace, run_task=run_task), *self._extra]

        factory = fresh_tools if tools is None else None
        self.sessions = ToolSessions(self.tools, factory, idle_timeout=session_idle_timeout)
        self._server: Any = None

    @staticmethod
    def default_tools(workspace: Path | None = None, *, run_task: bool = False) -> list[BaseTool]:
        """bash, python_execute, str_replace_editor, browser_use (if installed), terminate;
        the first three share one sandbox of the configured backend, as in an agent."""
        box = create_sandbox(workspace=workspace)  # started on first use
        tools: list[BaseTool] = [
            Bash(workspace=workspace, sandbox=box),
            PythonExecute(workspace=workspace, sandbox=box),
            StrReplaceEditor(workspace=workspace, sandbox=box),
        ]
        browser = browser_tool_or_notice()
        if browser is not None:
            tools.append(browser)
        tools.append(Terminate())
        if run_task:
            tools.append(RunTask(workspace=workspace))
        return tools

    def register_tool(self, tool: BaseTool, method_name: str | None = None) -> None:
        """Offer one more tool (upstream's method); ``method_name`` renames it."""
        if method_name and method_name != tool.name:
            tool = tool.model_copy(update={"name": method_name})
        self.tools.add_tool(tool)
        self._extra.append(tool)  # shared by the sessions: we cannot duplicate it

    async def list_tools(self) -> list[Any]:
        """The tools as MCP ``Tool`` objects, schemas exactly as the agents see them."""
        from mcp import types

        return [
            types.Tool(
                name=tool.name,
                description=tool.description,
                input_schema=tool.parameters or {"type": "object", "properties": {}},
            )
            for tool in self.tools
        ]

    async def call_tool(
        self, name: str, arguments: dict[str, Any] | None, session: str | None = None
    ) -> Any:
        """Run a tool in ``session``'s tool set (None: the server's own, as on stdio); its
        failures come back as ``is_error`` results, an unknown name as JSON-RPC -32602."""
        if name not in self.tools.tool_map:
            from mcp.shared.exceptions import MCPError
            from mcp.types import INVALID_PARAMS

            known = ", ".join(self.tools.tool_map)
            raise MCPError(INVALID_PARAMS, f"Unknown tool: {name!r} (tools: {known})")
        logger.info(f"🔧 MCP call: {name}")
        result = await self.sessions.execute(session, name, dict(arguments or {}))
        return _to_call_result(result)

    def build(self) -> Any:
        """The SDK's low-level server wired to our handlers (built once)."""
        if self._server is None:
            from mcp import types
            from mcp.server.lowlevel import Server

            async def on_list_tools(ctx: Any, params: Any) -> Any:
                return types.ListToolsResult(tools=await self.list_tools())

            async def on_call_tool(ctx: Any, params: Any) -> Any:
                return await self.call_tool(params.name, params.arguments, session_key(ctx))

            self._server = Server(
                self.name,
                version=__version__,
                on_list_tools=on_list_tools,
                on_call_tool=on_call_tool,
            )
        return self._server

    async def cleanup(self) -> None:
        """Stop the tools' processes and close the browsers, for every session."""
        await self.sessions.close_all()
        await self.tools.cleanup()

    async def serve(
        self,
        transport: str = "stdio",
        *,
        host: str = "127.0.0.1",
        port: int = 8000,
        on_ready: Callable[[str], None] | None = None,
    ) -> None:
        """Serve until the client leaves (stdio) or the process is stopped; always cleans up.
        ``port`` 0 picks a free port; ``on_ready`` receives the URL once it is listening."""
        kind = _TRANSPORTS.get(transport)
        if kind is None:
            raise ValueError(f"unknown transport {transport!r}; use stdio, sse or http")
        try:
            if kind == "stdio":
                await self._serve_stdio(on_ready)
            else:
                await self._serve_http(kind, host, port, on_ready)
        finally:
            with contextlib.suppress(Exception):
                await asyncio.shield(self.cleanup())

    async def _serve_stdio(self, on_ready: Callable[[str], None] | None) -> None:
        from mcp.server.stdio import stdio_server

        server = self.build()
        async with stdio_server() as (read, write):
            if on_ready is not None:
                on_ready("stdio")
            await server.run(read, write, server.create_initialization_options())

    async def _serve_http(
        self, kind: str, host: str, port: int, on_ready: Callable[[str], None] | None
    ) -> None:
        import uvicorn

        app, path = self._sse_app(host) if kind == "sse" else self._http_app(host)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as e:
            sock.close()
            raise OSError(f"cannot listen on {host}:{port}: {e.strerror or e}") from e
        # Listening before uvicorn starts: clients that connect early wait in the backlog
        # until the app is up, so "ready" can be announced without polling.
        sock.listen(128)
        bound_port = sock.getsockname()[1]
        shown = f"[{host}]" if ":" in host else host
        server = _quiet_exit_server()(uvicorn.Config(app, log_level="warning", lifespan="on"))
        if on_ready is not None:
            on_ready(f"http://{shown}:{bound_port}{path}")
        reaper = asyncio.ensure_future(self.sessions.reap_forever())
        try:
            # Our own browser_use may not open this server (app.own_servers).
            with own_servers.listening("MCP server", sock):
                await server.serve(sockets=[sock])
        finally:
            reaper.cancel()
            sock.close()

    def _http_app(self, host: str) -> tuple[Any, str]:
        server = self.build()
        inner = server.streamable_http_app(host=host)
        # The transport forgets idle sessions after the same time we drop their tools.
        server.session_manager.session_idle_timeout = self.sessions.idle_timeout

        async def app(scope: Any, receive: Any, send: Any) -> None:
            await inner(scope, receive, send)
            if scope.get("type") == "http" and scope.get("method") == "DELETE":
                # The client ended its session: its shell, sandbox and browser go too.
                for key, value in scope.get("headers", ()):
                    if key.lower() == b"mcp-session-id" and value:
                        await self.sessions.close(f"http:{value.decode('latin-1')}")

        return app, "/mcp"

    def _sse_app(self, host: str) -> tuple[Any, str]:
        from mcp.server.sse import SseServerTransport
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import Response
        from starlette.routing import Mount, Route

        server = self.build()
        transport = SseServerTransport("/messages/", security_settings=_local_security(host))

        async def sse_endpoint(request: Request) -> Response:
            # Everything this connection runs inherits the key of its own tool set.
            key = f"sse:{uuid.uuid4().hex}"
            token = SSE_CONNECTION.set(key)
            try:
                streams = transport.connect_sse(request.scope, request.receive, request._send)
                async with streams as (read, write):
                    await server.run(read, write, server.create_initialization_options())
            finally:
                SSE_CONNECTION.reset(token)
                await self.sessions.close(key)
            return Response()

        routes = [
            Route("/sse", endpoint=sse_endpoint, methods=["GET"]),
            Mount("/messages/", app=transport.handle_post_message),
        ]
        return Starlette(routes=routes), "/sse"

    def run(self, transport: str = "stdio", **kwargs: Any) -> None:
        """Blocking ``serve`` (upstream's entry point)."""
        asyncio.run(self.serve(transport, **kwargs))


def _quiet_exit_server() -> type[uvicorn.Server]:
    """uvicorn's server, minus re-raising SIGTERM/SIGINT after shutdown: that would kill the
    process before our cleanup (bash sessions, browser) runs."""
    import uvicorn

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            handled = (signal.SIGINT, signal.SIGTERM)
            previous = {sig: signal.signal(sig, self.handle_exit) for sig in handled}
            try:
                yield
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

    return Server


def _local_security(host: str) -> Any:
    """DNS-rebinding protection for loopback binds (the SDK does the same for HTTP)."""
    if host not in LOOPBACK_HOSTS:
        return None
    from mcp.server.transport_security import TransportSecuritySettings

    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
        allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
    )


def _to_call_result(result: Any) -> Any:
    from mcp import types

    image = getattr(result, "base64_image", None)
    value = result.output if isinstance(result, ToolResult) else result
    error = result.error if isinstance(result, ToolResult) else None
    # What leaves for the client goes without the registered secrets, as the agent's model
    # gets it (credential-shaped code stays readable): docs/sessions-and-events.md.
    text = redact_text(error or format_output(value), registered_only=True)
    structured = redact_tree(value, registered_only=True) if isinstance(value, dict) else None
    content: list[Any] = []
    if text or not image:
        content.append(types.TextContent(type="text", text=text or ""))
    if image:
        content.append(types.ImageContent(type="image", data=image, mime_type=_image_mime(image)))
    return types.CallToolResult(
        content=content, structured_content=structured, is_error=result_failed(result)
    )


def _image_mime(data: str) -> str:
    for prefix, mime in (("iVBOR", "image/png"), ("R0lGOD", "image/gif"), ("UklGR", "image/webp")):
        if data.startswith(prefix):
            return mime
    return "image/jpeg"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m app.mcp.server",
        description="Serve OpenManus tools (bash, python_execute, str_replace_editor, "
        "browser_use, terminate) over the Model Context Protocol.",
    )
    parser.add_argument(
        "--transport",
        default="stdio",
        choices=sorted(_TRANSPORTS),
        help="stdio (default; for a client that starts this process), sse, or http "
        "(streamable HTTP, endpoint /mcp)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 = any free)")
    parser.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a non-loopback --host although bash and python_execute run arbitrary code",
    )
    parser.add_argument("--name", default="openmanus", help="server name reported to clients")
    parser.add_argument(
        "-c",
        "--config",
        type=Path,
        help="config file: workspace, [sandbox], [browser]; [llm] only with --run-task",
    )
    parser.add_argument("-w", "--workspace", type=Path, help="directory the tools work in")
    parser.add_argument(
        "--run-task",
        action="store_true",
        help="also offer run_task: a whole task handed to a Manus agent (needs an LLM config)",
    )
    level = parser.add_mutually_exclusive_group()
    level.add_argument("-v", "--verbose", action="store_true", help="log tool calls to stderr")
    level.add_argument("-q", "--quiet", action="store_true", help="log only errors")
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line parsed (upstream's ``run_mcp_server.py`` calls this, then
    ``MCPServer().run(transport=args.transport)``)."""
    return build_parser().parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    level = "INFO" if args.verbose else "ERROR" if args.quiet else "WARNING"
    define_log_level(print_level=level, logfile_level="OFF", compact=True)
    transport = _TRANSPORTS[args.transport]
    if transport != "stdio" and args.host not in LOOPBACK_HOSTS:
        if not args.allow_remote:
            print(
                f"error: refusing to serve bash and python_execute on {args.host}: anyone who "
                "can reach it could run code here. Use --allow-remote if you mean it.",
                file=sys.stderr,
            )
            return 2
        print(
            f"warning: serving code-execution tools on {args.host}; anyone who can reach this "
            "port can run commands on this machine.",
            file=sys.stderr,
        )
    try:
        return asyncio.run(_main(args, transport))
    except KeyboardInterrupt:
        return 130


async def _main(args: argparse.Namespace, transport: str) -> int:
    # stdin may be the MCP channel: nothing in here may ever read it for a human.
    set_input_provider(CallbackInputProvider(lambda question: None))
    try:
        _load_config(args.config, run_task=args.run_task)
        server = MCPServer(args.name, workspace=args.workspace, run_task=args.run_task)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    loop = asyncio.get_running_loop()
    if transport == "stdio":
        # The SDK reads stdin in a thread that cancellation cannot interrupt, so a signal
        # while the client keeps stdin open would never finish the loop: clean up and leave.
        exiting: list[asyncio.Task[None]] = []

        def on_signal() -> None:
            if not exiting:
                exiting.append(asyncio.ensure_future(_cleanup_and_exit(server)))

        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, on_signal)

    def ready(where: str) -> None:
        if where != "stdio":
            print(f"OpenManus MCP server listening on {where}", file=sys.stderr, flush=True)

    try:
        await server.serve(transport, host=args.host, port=args.port, on_ready=ready)
    except asyncio.CancelledError:
        return 0
    except OSError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


def _load_config(path: Path | None, *, run_task: bool) -> None:
    """Read the sections the server uses from ``path`` (else the default file, if any) now,
    so a broken file fails at start; the whole file only with ``run_task`` (its agent needs
    the model). No file at all: the tools use their defaults."""
    chosen = path if path is not None else find_config_path()
    if path is None and not chosen.is_file():
        return
    config.load(chosen, sections=None if run_task else TOOL_SECTIONS)


async def _cleanup_and_exit(server: MCPServer) -> None:
    try:
        await asyncio.wait_for(server.cleanup(), 10)
    except Exception as e:  # exiting anyway; say why the cleanup was incomplete
        print(f"warning: cleanup failed: {e}", file=sys.stderr)
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
