"""Agents that offer MCP servers' tools: connections stay open from one run to the next
(upstream disconnected after each run); only ``cleanup()`` closes them, and even then the
tools reconnect on their next call. Sampling uses the agent's LLM, roots its workspace.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field

from app.agent.react import ReActAgent
from app.agent.toolcall import ToolCallAgent
from app.config import MCPServerConfig
from app.logger import logger
from app.tool.mcp import MCPClients, MCPClientTool

__all__ = ["MCPHostAgent"]


class MCPHostAgent(ToolCallAgent):
    """A ``ToolCallAgent`` whose ``available_tools`` also hold the tools of ``mcp_clients``."""

    mcp_clients: MCPClients = Field(default_factory=MCPClients)
    connected_servers: dict[str, str] = Field(default_factory=dict)
    mcp_failures: dict[str, str] = Field(default_factory=dict)
    #: Whether a server's tool named like a special tool (``mcp_<server>_terminate``) ends the
    #: run. False: an agent with tools of its own ends only by its own ``terminate``; only
    #: ``MCPAgent``, whose tools all come from the server it was pointed at, sets it.
    server_special_tools: bool = False

    # ---- connecting ----------------------------------------------------------------------------

    async def connect_mcp_servers(self, servers: Mapping[str, MCPServerConfig]) -> dict[str, str]:
        """Connect every server; failures are logged and returned (``{id: reason}``), and the
        agent works on with the servers that did connect."""
        await self._attach_mcp_features()
        failures = await self.mcp_clients.connect_all(servers)
        for server_id, config in servers.items():
            if server_id in failures:
                self.mcp_failures[server_id] = failures[server_id]
                logger.warning(f"MCP server '{server_id}' is not available: {failures[server_id]}")
            else:
                self.mcp_failures.pop(server_id, None)
                self.connected_servers[server_id] = _target(config)
        self._sync_mcp_tools()
        return failures

    async def connect_mcp_server(
        self,
        server_url: str,
        server_id: str = "",
        use_stdio: bool = False,
        stdio_args: list[str] | None = None,
    ) -> list[str]:
        """Upstream's helper: ``server_url`` is a command when ``use_stdio``, else an SSE URL."""
        await self._attach_mcp_features()
        if use_stdio:
            names = await self.mcp_clients.connect_stdio(server_url, stdio_args or [], server_id)
        else:
            names = await self.mcp_clients.connect_sse(server_url, server_id)
        for name in names:
            tool = self.mcp_clients.get_tool(name)
            if isinstance(tool, MCPClientTool):
                self.connected_servers[tool.server_id] = server_url
        self._sync_mcp_tools()
        return names

    async def disconnect_mcp_server(self, server_id: str = "") -> None:
        """Disconnect one server (or all, with an empty id) and take its tools away."""
        await self.mcp_clients.disconnect(server_id)
        if server_id:
            self.connected_servers.pop(server_id, None)
        else:
            self.connected_servers.clear()
        self._sync_mcp_tools()

    async def _attach_mcp_features(self) -> None:
        """The agent's LLM answers sampling; its workspace is the servers' root."""
        clients = self.mcp_clients
        if clients.llm is None:
            clients.llm = self.llm
        workspace = getattr(self, "workspace", None)
        if workspace is not None and clients.workspace != workspace:
            await clients.set_workspace(workspace)

    # ---- keeping the tool list in step ---------------------------------------------------------

    def _sync_mcp_tools(self) -> None:
        """Mirror ``mcp_clients`` into ``available_tools`` (a server's tools may have gone)."""
        tools = self.available_tools
        if tools is None or tools is self.mcp_clients:
            return
        wanted = self.mcp_clients.tool_map
        for tool in list(tools):
            if isinstance(tool, MCPClientTool) and wanted.get(tool.name) is not tool:
                tools.remove_tool(tool.name)
        for name, tool in wanted.items():
            if name not in tools.tool_map:
                tools.add_tool(tool)

    async def think(self) -> bool:
        await self._attach_mcp_features()
        self._sync_mcp_tools()
        return await super().think()

    def _is_special_tool(self, name: str) -> bool:
        """Special tools (``terminate``) are our own tool objects: a server's tool never ends
        the run, whatever it is called, unless ``server_special_tools`` says it may."""
        tool = self.available_tools.get_tool(name) if self.available_tools else None
        if isinstance(tool, MCPClientTool):
            return self.server_special_tools and super()._is_special_tool(tool.original_name)
        return super()._is_special_tool(name)

    # ---- lifetime ------------------------------------------------------------------------------

    async def run(self, request: str | None = None) -> Any:
        # Skip ToolCallAgent.run's cleanup(): that would close the connections after each run.
        try:
            return await ReActAgent.run(self, request)
        finally:
            await self.release_run_resources()

    async def release_run_resources(self) -> None:
        """What every run releases: the tools' per-run resources, not the MCP connections."""
        if self.available_tools is not None:
            await self.available_tools.cleanup()

    async def cleanup(self) -> None:
        """Release the tools and close every MCP connection (tools reconnect if used again)."""
        await super().cleanup()
        await self.mcp_clients.close()


def _target(config: MCPServerConfig) -> str:
    if config.type == "stdio":
        return " ".join([config.command or "", *config.args]).strip()
    return config.url or ""
