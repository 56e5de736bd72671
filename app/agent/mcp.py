"""Agents that offer MCP servers' tools. ``MCPHostAgent`` (the base of ``Manus``) keeps the
connections open from one run to the next (upstream disconnected after each run); only
``cleanup()`` closes them, and even then the tools reconnect on their next call. Sampling uses
the agent's LLM, roots its workspace. ``MCPAgent``'s tools all come from MCP servers: unlike
upstream, the server's ``terminate`` ends the run and a refreshed tool list changes what the
model can call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field, PrivateAttr, model_validator

from app.agent.react import ReActAgent
from app.agent.result import RunResult, StopReason
from app.agent.toolcall import ToolCallAgent
from app.config import MCPServerConfig
from app.logger import logger
from app.mcp.client import target
from app.prompt.mcp import NEXT_STEP_PROMPT, SYSTEM_PROMPT, TOOLS_CHANGED_PROMPT, UNAVAILABLE_ANSWER
from app.schema import Message
from app.tool.mcp import MCPClients, MCPClientTool
from app.tool.tool_collection import ToolCollection


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
                self.connected_servers[server_id] = target(config)
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
        features = self.mcp_clients.features
        if features.llm is None:
            features.llm = self.llm
        workspace = getattr(self, "workspace", None)
        if workspace is not None:
            await self.mcp_clients.set_workspace(workspace)

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

    async def run(self, request: str | None = None) -> RunResult:
        # Skip ToolCallAgent.run's cleanup(): that would close the connections after each run;
        # release only the tools' per-run resources.
        try:
            return await ReActAgent.run(self, request)
        finally:
            if self.available_tools is not None:
                await self.available_tools.cleanup()

    async def cleanup(self) -> None:
        """Release the tools and close every MCP connection (tools reconnect if used again)."""
        await super().cleanup()
        await self.mcp_clients.close()


_CONNECTION_TYPES = {"stdio": "stdio", "sse": "sse", "http": "http", "streamable-http": "http"}


class MCPAgent(MCPHostAgent):
    """Connect with ``initialize(...)``, then ``run()`` as often as needed; ``cleanup()`` at
    the end closes the connection."""

    name: str = "mcp_agent"
    description: str = "An agent that connects to an MCP server and uses its tools."

    system_prompt: str = SYSTEM_PROMPT
    next_step_prompt: str = NEXT_STEP_PROMPT

    max_steps: int = 20
    connection_type: str = "stdio"
    tool_schemas: dict[str, dict[str, Any]] = Field(default_factory=dict)
    refresh_tools_interval: int = 5
    #: Always the servers' tools (``mcp_clients``), set by the validator below.
    available_tools: ToolCollection = Field(default_factory=ToolCollection)
    special_tool_names: list[str] = Field(default_factory=lambda: ["terminate"])
    #: Its tools all come from the server it was pointed at: the server's ``terminate`` is
    #: how the model ends the run (an agent with tools of its own never lets a server do so).
    server_special_tools: bool = True

    _prompt_template: str = PrivateAttr(default=SYSTEM_PROMPT)

    @model_validator(mode="after")
    def _use_mcp_tools(self) -> MCPAgent:
        # The model sees exactly the servers' tools (upstream: available_tools = mcp_clients).
        self.available_tools = self.mcp_clients
        self._prompt_template = self.system_prompt
        return self

    async def initialize(
        self,
        connection_type: str | None = None,
        server_url: str | None = None,
        command: str | None = None,
        args: list[str] | None = None,
        *,
        server_id: str = "",
        headers: dict[str, str] | None = None,
        env: dict[str, str] | None = None,
        inherit_env: bool = False,
    ) -> None:
        """Connect to a server: ``stdio`` starts ``command args``; ``sse``/``http`` reach
        ``server_url``. Raises ``MCPServerError`` when it cannot be reached."""
        await self._attach_mcp_features()
        kind = _CONNECTION_TYPES.get((connection_type or self.connection_type).lower())
        if kind is None:
            raise ValueError(
                f"Unsupported connection type: {connection_type!r} (use stdio, sse or http)"
            )
        if kind == "stdio":
            if not command:
                raise ValueError("Command is required for stdio connection")
            await self.mcp_clients.connect_stdio(
                command, args or [], server_id, env, inherit_env=inherit_env
            )
        else:
            if not server_url:
                raise ValueError(f"Server URL is required for {kind} connection")
            if kind == "sse":
                await self.mcp_clients.connect_sse(server_url, server_id, headers)
            else:
                await self.mcp_clients.connect_http(server_url, server_id, headers)
        self.connection_type = kind
        self._tools_updated()
        logger.info(f"{self.name} can use: {', '.join(self.mcp_clients.tool_map) or 'no tools'}")

    def _tools_updated(self) -> None:
        self.tool_schemas = {t.name: t.parameters or {} for t in self.mcp_clients}
        listing = (
            "\n".join(f"- {t.name}: {_first_line(t.description)}" for t in self.mcp_clients)
            or "- (none yet)"
        )
        if "{tools}" in self._prompt_template:
            self.system_prompt = self._prompt_template.replace("{tools}", listing)

    async def _refresh_tools(self) -> tuple[list[str], list[str]]:
        """List the tools again; tell the model what was added, removed or changed."""
        changes = await self.mcp_clients.refresh()
        self._tools_updated()
        if changes:
            parts = (
                ("New", changes.added),
                ("No longer available", changes.removed),
                ("Changed (check their parameters)", changes.changed),
            )
            listed = " ".join(f"{what}: {', '.join(names)}." for what, names in parts if names)
            note = TOOLS_CHANGED_PROMPT.format(changes=listed)
            logger.info(f"🔄 {note}")
            self.memory.add_message(Message.user_message(note))
        return changes.added, changes.removed

    async def think(self) -> bool:
        if not self.mcp_clients.connections:
            return self._give_up("No MCP server is connected (call initialize() first).")
        interval = self.refresh_tools_interval
        due = interval > 0 and self.current_step % interval == 0
        if due or self.mcp_clients.tools_changed or not self.mcp_clients.tools:
            await self._refresh_tools()
        if not self.mcp_clients.tools:
            reasons = [c.last_error for c in self.mcp_clients.connections.values() if c.last_error]
            return self._give_up(" ".join(reasons) or "It offers no tools.")
        return await super().think()

    def _give_up(self, reason: str) -> bool:
        answer = UNAVAILABLE_ANSWER.format(reason=reason)
        self._set_final_answer(answer)
        self.fail(StopReason.ERROR, answer)
        return False


def _first_line(text: str | None) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line if len(line) <= 200 else line[:199] + "…"
