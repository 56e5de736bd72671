"""A small third-party-style MCP server for the client tests (not our own server).

``python demo_server.py`` serves over stdio; ``--http`` serves streamable HTTP on a free
127.0.0.1 port and prints ``listening on <url>`` to stderr once it accepts connections.
"""

from __future__ import annotations

import asyncio
import base64
import os
import socket
import sys

from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

__all__ = ["PNG_B64", "server"]

PNG_B64 = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
)

server = MCPServer("demo")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def fail(reason: str) -> str:
    """Always fails with the given reason."""
    raise ToolError(f"failed on purpose: {reason}")


@server.tool()
def picture() -> Image:
    """A 1x1 PNG."""
    return Image(data=base64.b64decode(PNG_B64), format="png")


@server.tool()
def pid() -> int:
    """This server's process id."""
    return os.getpid()


@server.tool()
async def slow(seconds: float) -> str:
    """Answer after a while."""
    await asyncio.sleep(seconds)
    return "done"


@server.tool()
async def grow(ctx: Context) -> str:
    """Add a tool named 'extra' and tell the client the list changed."""

    def extra() -> str:
        """A tool that appeared later."""
        return "extra!"

    server.add_tool(extra)
    await ctx.session.send_tool_list_changed()
    return "grown"


async def _serve_http() -> None:
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)  # early clients wait in the backlog until the app is up
    port = sock.getsockname()[1]
    app = server.streamable_http_app(host="127.0.0.1")
    web = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    print(f"listening on http://127.0.0.1:{port}/mcp", file=sys.stderr, flush=True)
    await web.serve(sockets=[sock])


if __name__ == "__main__":
    if "--http" in sys.argv:
        asyncio.run(_serve_http())
    else:
        server.run()
