"""MCP tool results as our ``ToolResult`` (every part survives: docs/mcp.md) and MCP tool
names as function names.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Collection
from typing import Any

from pydantic import Field

from app.tool.base import ToolFailure, ToolResult

__all__ = [
    "MAX_EMBEDDED_TEXT",
    "MAX_TOOL_NAME",
    "MCPToolFailure",
    "MCPToolResult",
    "convert_result",
    "is_text_mime",
    "tool_name",
]

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
