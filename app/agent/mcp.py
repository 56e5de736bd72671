"""``MCPAgent``: an agent whose tools all come from MCP servers. Unlike upstream, the server's
``terminate`` ends the run, a refreshed tool list changes what the model can call, and runs
do not disconnect.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, PrivateAttr, model_validator

from app.agent.mcp_host import MCPHostAgent
from app.agent.result import StopReason
from app.logger import logger
from app.prompt.mcp import NEXT_STEP_PROMPT, SYSTEM_PROMPT, TOOLS_CHANGED_PROMPT, UNAVAILABLE_ANSWER
from app.schema import Message
from app.tool.tool_collection import ToolCollection

__all__ = ["MCPAgent"]

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
        self._final_answer = answer
        self.fail(StopReason.ERROR, answer)
        return False


def _first_line(text: str | None) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line if len(line) <= 200 else line[:199] + "…"
