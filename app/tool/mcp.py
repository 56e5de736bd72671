"""MCP servers' tools as our tools: ``MCPClientTool`` (one remote tool) and ``MCPClients`` (a
``ToolCollection`` of every tool of every connected server; connections belong to the instance,
not the class as upstream had them), their results as our ``ToolResult`` (every part survives).
Naming, reconnection, results, the ``[mcp]`` caps on what servers may put in front of the
model, and task-only tools: docs/mcp.md. ``features`` (``app.tool.mcp_features``) answers the
servers' own requests (sampling, elicitation, roots).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import itertools
import json
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from pydantic import Field

from app.config import MCPServerConfig, MCPSettings
from app.config import config as app_config
from app.exceptions import ConfigError, MCPServerError
from app.logger import logger
from app.mcp.client import (
    DEFAULT_CALL_TIMEOUT,
    DEFAULT_CONNECT_TIMEOUT,
    MCPCallTimeout,
    MCPConnection,
    MCPConnectionLost,
)
from app.sandbox.hostside import HOST_CWD, isolate_args
from app.tool.base import BaseTool, ToolFailure, ToolResult
from app.tool.mcp_features import MCPClientFeatures
from app.tool.progress import current_tool_call
from app.tool.tool_collection import ToolCollection

#: OpenAI function names: ``^[a-zA-Z0-9_-]{1,64}$``.
MAX_TOOL_NAME = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
#: Characters of one embedded text resource the model gets; the rest is cut with a note.
MAX_EMBEDDED_TEXT = 100_000
#: ``application/`` types that are text a model can read.
_TEXT_APPLICATION = frozenset(
    f"application/{name}"
    for name in "json xml javascript ecmascript x-yaml yaml toml x-toml sql graphql x-sh "
    "x-python csv ld+json x-www-form-urlencoded".split()
)


def tool_name(server_id: str, name: str, taken: Collection[str] = ()) -> str:
    """``mcp_{server_id}_{name}`` made safe for function calling and unique among ``taken``."""
    base = candidate = _UNSAFE.sub("_", f"mcp_{server_id}_{name}")[:MAX_TOOL_NAME]
    n = 2
    while candidate in taken:
        suffix = f"_{n}"
        candidate, n = base[: MAX_TOOL_NAME - len(suffix)] + suffix, n + 1
    return candidate


class MCPToolResult(ToolResult):
    """A successful MCP result; ``structured_content`` is the server's JSON value, if any."""

    structured_content: Any = Field(default=None)


class MCPToolFailure(ToolFailure):
    """A result the server flagged with ``isError``."""

    structured_content: Any = Field(default=None)


def convert_result(result: Any) -> ToolResult:
    """A ``CallToolResult`` from the SDK as the result the agent hands to the model."""
    texts: list[str] = []
    images: list[str] = []
    for block in getattr(result, "content", None) or []:
        kind = getattr(block, "type", None)
        if kind == "text":
            texts.append(block.text)
        elif kind == "image":
            images.append(block.data)
        elif kind == "audio":
            texts.append(f"[audio content ({block.mime_type}) not shown]")
        elif kind == "resource":
            embedded_image = _embedded_image(block.resource)
            if embedded_image is not None:
                images.append(embedded_image)
            else:
                texts.append(_describe_resource(block.resource))
        elif kind == "resource_link":
            texts.append(_describe_link(block))
        else:
            texts.append(f"[{kind or 'unknown'} content not shown]")
    structured = getattr(result, "structured_content", None)
    if structured is not None and not texts:
        texts.append(json.dumps(structured, ensure_ascii=False, default=str))
    if len(images) > 1:
        texts.append(f"[{len(images) - 1} more image(s) returned; only the first is shown]")
    image = images[0] if images else None
    if image is not None and not texts:
        texts.append("[the tool returned an image]")
    text = "\n".join(texts)
    if getattr(result, "is_error", False):
        return MCPToolFailure(
            error=text or "the tool reported an error without a message",
            base64_image=image,
            structured_content=structured,
        )
    return MCPToolResult(output=text, base64_image=image, structured_content=structured)


def is_text_mime(mime: str | None) -> bool:
    """Whether content of this type is text a model can read."""
    if not mime:
        return False
    base = mime.split(";", 1)[0].strip().lower()
    return (
        base.startswith("text/")
        or base in _TEXT_APPLICATION
        or base.endswith(("+json", "+xml", "+yaml"))
    )


def _cap(text: str) -> str:
    if len(text) <= MAX_EMBEDDED_TEXT:
        return text
    cut = len(text) - MAX_EMBEDDED_TEXT
    return text[:MAX_EMBEDDED_TEXT] + f"\n[... {cut} more characters not shown]"


def _describe_resource(resource: Any) -> str:
    uri = str(getattr(resource, "uri", "") or "")
    mime = getattr(resource, "mime_type", None)
    text = getattr(resource, "text", None)
    if text is not None:
        return _cap(text)
    blob = getattr(resource, "blob", None) or ""
    try:
        raw = base64.b64decode(blob, validate=False)
    except (binascii.Error, ValueError):
        return f"[embedded resource {uri} ({mime or 'binary'}): undecodable base64 data]"
    if is_text_mime(mime):
        # Decode only what is shown (a hostile server may send a huge blob).
        head = raw[: MAX_EMBEDDED_TEXT * 4 + 4].decode("utf-8", "replace")
        if len(raw) > MAX_EMBEDDED_TEXT * 4 + 4 and len(head) <= MAX_EMBEDDED_TEXT:
            head += "\n[... the rest of the resource is not shown]"
        return f"[embedded resource {uri} ({mime})]\n{_cap(head)}"
    return f"[embedded resource {uri} ({mime or 'binary'}, {len(raw)} bytes) not shown]"


def _embedded_image(resource: Any) -> str | None:
    mime = (getattr(resource, "mime_type", None) or "").lower()
    blob = getattr(resource, "blob", None)
    if blob and mime in {"image/png", "image/jpeg", "image/gif", "image/webp"}:
        return str(blob)
    return None


def _describe_link(link: Any) -> str:
    """A resource link with everything the server said about it (the model may fetch it)."""
    name = getattr(link, "title", None) or getattr(link, "name", None) or ""
    parts = [f"[resource link: {name}" if name else "[resource link:", f"<{link.uri}>"]
    mime = getattr(link, "mime_type", None)
    size = getattr(link, "size", None)
    details = ", ".join(x for x in (mime, f"{size} bytes" if size is not None else None) if x)
    if details:
        parts.append(f"({details})")
    description = getattr(link, "description", None)
    text = " ".join(parts)
    return f"{text} — {description}]" if description else f"{text}]"


#: Marks a description cut at ``max_description_chars``.
_CUT_MARK = "… [description cut: {total} characters in all]"


class MCPClientTool(BaseTool):
    """A tool that lives on an MCP server; calling it sends ``tools/call`` there."""

    server_id: str = ""
    original_name: str = ""
    connection: Any = Field(default=None, exclude=True, repr=False)
    owner: Any = Field(default=None, exclude=True, repr=False)

    @property
    def session(self) -> Any:
        """The SDK session in use (upstream's attribute), or None while disconnected."""
        return self.connection.session if self.connection is not None else None

    async def execute(self, **kwargs: Any) -> ToolResult:
        if self.connection is None:
            return ToolFailure(error="Not connected to MCP server")
        call = current_tool_call()
        try:
            result = await self.connection.call_tool(
                self.original_name, kwargs, on_progress=call.report if call else None
            )
        except (MCPCallTimeout, MCPConnectionLost) as e:
            return ToolFailure(error=str(e))
        except MCPServerError as e:  # could not (re)connect
            if self.owner is not None:
                self.owner.mark_unreachable(self.server_id)
            return ToolFailure(
                error=f"{e}\nIts tools are unavailable until the server can be reached again."
            )
        return convert_result(result)


@dataclass
class ToolChanges:
    """What a refresh changed, by tool name."""

    added: list[str]
    removed: list[str]
    changed: list[str]

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.changed)


class MCPClients(ToolCollection):
    """Connections to MCP servers and all their tools, ready for an agent to offer.
    ``cleanup()`` (after every run) keeps the connections open; ``disconnect()`` closes them."""

    description: str = "MCP client tools for server interaction"

    def __init__(
        self,
        *,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        features: MCPClientFeatures | None = None,
        limits: MCPSettings | None = None,
    ) -> None:
        super().__init__()
        self.connect_timeout = connect_timeout
        self.call_timeout = call_timeout
        #: What servers may put in front of the model: the ``[mcp]`` caps (None: the loaded
        #: config's, or the defaults, read at the first connect).
        self.limits = limits
        #: Answers the servers' sampling, elicitation and roots requests.
        self.features = features or MCPClientFeatures()
        #: Tools left out because they need MCP tasks: ``{tool name: reason}``.
        self.skipped: dict[str, str] = {}
        self.connections: dict[str, MCPConnection] = {}
        self._schemas: dict[str, tuple[str, str]] = {}
        self._changed = asyncio.Event()
        self._reported: set[tuple[str, str]] = set()  # (server, what) already logged

    @property
    def sessions(self) -> dict[str, Any]:
        """Live SDK sessions by server id (upstream's attribute)."""
        return {sid: c.session for sid, c in self.connections.items() if c.connected}

    @property
    def tools_changed(self) -> bool:
        """True when a server announced that its tool list changed since the last listing."""
        return any(c.tools_changed for c in self.connections.values())

    async def wait_for_tools_change(self) -> None:
        """Wait until a server announces that its tool list changed (then ``refresh()``)."""
        if not self.tools_changed:
            await self._changed.wait()

    def _on_tools_changed(self, connection: MCPConnection) -> None:
        logger.debug(f"MCP server '{connection.server_id}' changed its tool list")
        self._changed.set()

    async def set_workspace(self, workspace: Path | None) -> None:
        """Change the root offered to servers and tell the connected ones."""
        before = self.features.workspace
        self.features.workspace = workspace
        if before != workspace:
            for connection in self.connections.values():
                await connection.notify_roots_changed()

    async def connect(
        self,
        server_id: str,
        server: MCPServerConfig | Mapping[str, Any],
        *,
        inherit_env: bool = False,
    ) -> list[str]:
        """Connect one server and add its tools; returns their names. Raises ``MCPServerError``.
        An empty ``server_id`` becomes the name the server reports (else its command or URL)."""
        config = server if isinstance(server, MCPServerConfig) else MCPServerConfig(**server)
        own = config.type == "stdio" and _runs_our_server(config.args)
        config = own_server_args(config, self.features)
        label = server_id or _unique_id(_default_id(config), self.connections)
        if label in self.connections:
            await self.disconnect(label)
        connection = MCPConnection(
            label,
            config,
            connect_timeout=self.connect_timeout,
            call_timeout=self.call_timeout,
            inherit_env=inherit_env,
            cwd=HOST_CWD if own else None,
            on_tools_changed=self._on_tools_changed,
            features=self.features,
            progress_interval=self._limits().progress_interval,
        )
        try:
            await connection.connect()
            if not server_id and connection.server_name:
                label = _unique_id(_safe_id(connection.server_name), self.connections)
                connection.server_id = label
            tools = await connection.list_tools()
        except BaseException:
            await connection.close()
            raise
        self.connections[label] = connection
        names = self._install(connection, tools)
        logger.info(f"🔌 MCP server '{label}' connected with {len(names)} tool(s)")
        return names

    async def connect_stdio(
        self,
        command: str,
        args: list[str] | None = None,
        server_id: str = "",
        env: dict[str, str] | None = None,
        *,
        inherit_env: bool = False,
    ) -> list[str]:
        """Start ``command args`` and talk MCP over its stdin/stdout."""
        if not command:
            raise ValueError("Server command is required.")
        config = MCPServerConfig(type="stdio", command=command, args=list(args or []), env=env)
        return await self.connect(server_id, config, inherit_env=inherit_env)

    async def connect_sse(
        self, server_url: str, server_id: str = "", headers: dict[str, str] | None = None
    ) -> list[str]:
        """Connect to an MCP server's SSE endpoint (e.g. ``http://127.0.0.1:8000/sse``)."""
        if not server_url:
            raise ValueError("Server URL is required.")
        config = MCPServerConfig(type="sse", url=server_url, headers=headers or {})
        return await self.connect(server_id, config)

    async def connect_http(
        self, server_url: str, server_id: str = "", headers: dict[str, str] | None = None
    ) -> list[str]:
        """Connect to a streamable-HTTP MCP endpoint (e.g. ``http://127.0.0.1:8000/mcp``)."""
        if not server_url:
            raise ValueError("Server URL is required.")
        config = MCPServerConfig(type="http", url=server_url, headers=headers or {})
        return await self.connect(server_id, config)

    async def connect_all(self, servers: Mapping[str, MCPServerConfig]) -> dict[str, str]:
        """Connect every server at once; returns ``{server_id: reason}`` for those that failed."""

        async def one(server_id: str, config: MCPServerConfig) -> str | None:
            try:
                await self.connect(server_id, config)
            except MCPServerError as e:
                return str(e)
            return None

        ids = list(servers)
        outcomes = await asyncio.gather(*(one(sid, servers[sid]) for sid in ids))
        return {sid: reason for sid, reason in zip(ids, outcomes, strict=True) if reason}

    def _limits(self) -> MCPSettings:
        if self.limits is None:
            loaded = app_config.is_loaded
            self.limits = app_config.app_config.mcp_config if loaded else MCPSettings()
        return self.limits

    def _install(self, connection: MCPConnection, tools: list[Any]) -> list[str]:
        """Replace ``connection``'s tools in the collection with ``tools``, within the caps."""
        self._drop_server(connection.server_id)
        server = connection.server_id
        limits = self._limits()
        self.skipped = {  # what this listing leaves out is decided anew (task tools aside)
            key: why
            for key, why in self.skipped.items()
            if not key.startswith(f"{server}/") or "MCP task" in why
        }
        room = limits.max_tools - sum(1 for t in self.tools if isinstance(t, MCPClientTool))
        names: list[str] = []
        over_cap: list[str] = []
        big_schema: list[str] = []
        cut = 0
        for tool in tools:
            key = f"{server}/{tool.name}"
            support = getattr(getattr(tool, "execution", None), "task_support", None)
            if support == "required":
                if key not in self.skipped:
                    logger.warning(
                        f"MCP server '{server}': tool '{tool.name}' is not offered:"
                        " it runs only as an MCP task, which this client does not support"
                    )
                self.skipped[key] = "runs only as an MCP task (taskSupport: required)"
                continue
            if len(names) >= room:
                over_cap.append(tool.name)
                self.skipped[key] = (
                    f"over the cap of {limits.max_tools} MCP tools ([mcp] max_tools)"
                )
                continue
            schema = tool.input_schema or {"type": "object", "properties": {}}
            size = len(json.dumps(schema, default=str))
            if size > limits.max_schema_chars:
                big_schema.append(tool.name)
                self.skipped[key] = (
                    f"its input schema has {size} characters, over [mcp] max_schema_chars "
                    f"({limits.max_schema_chars})"
                )
                continue
            description = tool.description or f"Tool '{tool.name}' of MCP server."
            if len(description) > limits.max_description_chars:
                cut += 1
                description = _cut_description(description, limits.max_description_chars)
            name = tool_name(server, tool.name, self.tool_map)
            self.add_tool(
                MCPClientTool(
                    name=name,
                    description=description,
                    parameters=schema,
                    server_id=server,
                    original_name=tool.name,
                    connection=connection,
                    owner=self,
                    # the server's own word that the tool only reads (MCP tool annotations)
                    concurrency_safe=bool(getattr(tool.annotations, "read_only_hint", False)),
                )
            )
            self._schemas[name] = (description, repr(schema))
            names.append(name)
        reports = []
        if over_cap:
            reports.append(
                f"MCP server '{server}' offers {len(over_cap)} tool(s) more than fit: at most "
                f"{limits.max_tools} MCP tools are offered to the model in all ([mcp] "
                f"max_tools); left out: {_listing(over_cap)}"
            )
        if big_schema:
            reports.append(
                f"MCP server '{server}': {len(big_schema)} tool(s) left out because their "
                f"input schema is over {limits.max_schema_chars} characters ([mcp] "
                f"max_schema_chars): {_listing(big_schema)}"
            )
        if cut:
            reports.append(
                f"MCP server '{server}': the descriptions of {cut} tool(s) were cut to "
                f"{limits.max_description_chars} characters ([mcp] max_description_chars)"
            )
        for message in reports:  # a cap hit is logged once per server and message
            if (server, message) not in self._reported:
                self._reported.add((server, message))
                logger.warning(message)
        return names

    def _drop_server(self, server_id: str) -> list[str]:
        gone = [
            t.name for t in self.tools if isinstance(t, MCPClientTool) and t.server_id == server_id
        ]
        for name in gone:
            self.remove_tool(name)
            self._schemas.pop(name, None)
        return gone

    def mark_unreachable(self, server_id: str) -> None:
        """Take an unreachable server's tools out of the collection (``refresh`` retries it)."""
        gone = self._drop_server(server_id)
        if gone:
            logger.warning(f"MCP server '{server_id}' is unreachable; removed {len(gone)} tool(s)")

    async def refresh(self) -> ToolChanges:
        """List every server's tools again (reconnecting servers that are down) and update
        the collection; returns what was added, removed or changed."""
        before = dict(self._schemas)
        self._changed.clear()
        for server_id, connection in list(self.connections.items()):
            try:
                tools = await connection.list_tools()
            except MCPServerError as e:
                logger.debug(f"Refresh of MCP server '{server_id}' failed: {e}")
                self._drop_server(server_id)
                continue
            self._install(connection, tools)
        after = self._schemas
        return ToolChanges(
            added=sorted(set(after) - set(before)),
            removed=sorted(set(before) - set(after)),
            changed=sorted(n for n in set(after) & set(before) if after[n] != before[n]),
        )

    async def list_tools(self) -> Any:
        """Every tool of every connected server, as one SDK ``ListToolsResult``."""
        from mcp.types import ListToolsResult

        tools: list[Any] = []
        for connection in self.connections.values():
            if connection.connected:
                tools.extend(await connection.list_tools())
        return ListToolsResult(tools=tools)

    async def disconnect(self, server_id: str = "") -> None:
        """Close one server's connection and drop its tools; an empty id means all servers."""
        ids = [server_id] if server_id else list(self.connections)
        for sid in ids:
            connection = self.connections.pop(sid, None)
            self._drop_server(sid)
            if connection is not None:
                try:
                    await connection.close()
                except Exception as e:
                    logger.warning(f"Closing MCP server '{sid}' failed: {e}")
                logger.info(f"Disconnected from MCP server '{sid}'")

    async def close(self) -> None:
        """Close every connection, keeping the tools: their next call reconnects."""
        for connection in self.connections.values():
            await connection.close()


def own_server_args(config: MCPServerConfig, features: MCPClientFeatures) -> MCPServerConfig:
    """Our own server (``python -m app.mcp.server``) started over stdio gets the workspace
    and config file explicitly: it may not inherit our environment or working directory. Its
    interpreter runs isolated (``-I``) and outside any workspace (``connect``), so nothing the
    model writes is imported on the host (docs/sandbox.md)."""
    if config.type != "stdio" or not _runs_our_server(config.args):
        return config
    args = isolate_args(list(config.args))
    if not _has_option(args, "-w", "--workspace"):
        args += ["--workspace", str(features.root_path())]
    if not _has_option(args, "-c", "--config") and (path := _config_file()) is not None:
        args += ["--config", str(path)]
    return config.model_copy(update={"args": args})


def _config_file() -> Path | None:
    try:
        path = app_config.config_path
    except ConfigError:  # no (valid) config file: the server uses its defaults
        return None
    return Path(path).resolve() if path is not None else None


def _runs_our_server(args: list[str]) -> bool:
    modules = {"app.mcp.server", app_config.section_or_default("mcp_config").server_reference}
    return any(a == "-m" and b in modules for a, b in itertools.pairwise(args))


def _has_option(args: list[str], short: str, option: str) -> bool:
    return any(a in (short, option) or a.startswith(option + "=") for a in args)


def _cut_description(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, the marker included."""
    mark = _CUT_MARK.format(total=len(text))
    return text[: max(0, limit - len(mark))] + mark


def _listing(names: list[str], shown: int = 10) -> str:
    """Some names, and how many more: a log line stays short however many there are."""
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more} more" if more > 0 else "")


def _default_id(config: MCPServerConfig) -> str:
    if config.type == "stdio":
        return _safe_id(Path(config.command or "server").name)
    return _safe_id(urlparse(config.url or "").hostname or "server")


def _safe_id(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", text).strip("_") or "server"


def _unique_id(base: str, taken: Mapping[str, Any]) -> str:
    candidate, n = base, 2
    while candidate in taken:
        candidate, n = f"{base}_{n}", n + 1
    return candidate
