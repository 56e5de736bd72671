"""Turning MCP tool results into our ``ToolResult`` and MCP tool names into function names.

Upstream kept only the text of a result, so images vanished and ``isError`` results looked
like successes to the model. Here every part survives: text, the first image (as
``base64_image``, which the agent sends to the model as an image), structured content, and
errors as ``ToolFailure``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from typing import Any

from pydantic import Field

from app.tool.base import ToolFailure, ToolResult

__all__ = ["MAX_TOOL_NAME", "MCPToolFailure", "MCPToolResult", "convert_result", "tool_name"]

#: OpenAI function names: ``^[a-zA-Z0-9_-]{1,64}$``.
MAX_TOOL_NAME = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def tool_name(server_id: str, name: str, taken: Collection[str] = ()) -> str:
    """``mcp_{server_id}_{name}`` made safe for function calling and unique among ``taken``."""
    base = _UNSAFE.sub("_", f"mcp_{server_id}_{name}")[:MAX_TOOL_NAME]
    if base not in taken:
        return base
    n = 2
    while True:
        suffix = f"_{n}"
        candidate = base[: MAX_TOOL_NAME - len(suffix)] + suffix
        if candidate not in taken:
            return candidate
        n += 1


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
            texts.append(_describe_resource(block.resource))
        elif kind == "resource_link":
            texts.append(f"[resource link: {block.uri}]")
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


def _describe_resource(resource: Any) -> str:
    text = getattr(resource, "text", None)
    if text is not None:
        return text
    mime = getattr(resource, "mime_type", None) or "binary"
    return f"[embedded resource {getattr(resource, 'uri', '')} ({mime}) not shown]"
