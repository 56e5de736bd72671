"""Turning our messages into the wire format, and the API's reply back into a ``Message``.

The request pass itself (with its repairs of orphaned tool calls and misplaced images) lives in
``app.llm.formatting``; this module is its public face and the way back.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from app.llm.formatting import IMAGE_OMITTED_NOTE, Formatted, image_part, prepare_messages
from app.schema import Function, Message, ToolCall
from app.tool.arguments import normalize_arguments

__all__ = [
    "IMAGE_OMITTED_NOTE",
    "Formatted",
    "format_messages",
    "image_part",
    "message_from_response",
    "prepare_messages",
]



def format_messages(
    messages: Iterable[Message | dict[str, Any]],
    *,
    supports_images: bool = True,
    model: str = "",
) -> tuple[list[dict[str, Any]], int]:
    """Wire-format ``messages``; returns them (fresh dicts the caller may change) and the
    number of images left out."""
    result = prepare_messages(list(messages), supports_images=supports_images, model=model)
    return [_copy_wire(wire) for wire in result.messages], result.omitted


def _copy_wire(wire: dict[str, Any]) -> dict[str, Any]:
    copied = dict(wire)
    calls = copied.get("tool_calls")
    if isinstance(calls, list):
        copied["tool_calls"] = [
            {**call, "function": dict(call["function"])}
            if isinstance(call, dict) and isinstance(call.get("function"), dict) else call
            for call in calls
        ]
    return copied


def message_from_response(data: dict[str, Any]) -> Message:
    """Our assistant ``Message`` from the API's ``choices[0].message`` object.

    Arguments arrive as text, as a JSON object, or as JSON text inside a JSON string; they are
    normalized to JSON text. Missing call ids (some local servers omit them) are generated.
    """
    calls = None
    raw_calls = data.get("tool_calls")
    if raw_calls:
        calls = []
        for raw in raw_calls:
            fn = raw.get("function") or {}
            calls.append(
                ToolCall(
                    id=str(raw.get("id") or f"call_{uuid.uuid4().hex[:24]}"),
                    type=raw.get("type") or "function",
                    function=Function(
                        name=str(fn.get("name") or ""),
                        arguments=normalize_arguments(fn.get("arguments")),
                    ),
                )
            )
    content = data.get("content")
    if isinstance(content, list):  # some servers answer with content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return Message(role="assistant", content=content, tool_calls=calls)
