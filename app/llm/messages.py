"""Turning our messages into the wire format, and the API's reply back into a ``Message``.

Two repairs happen here, at the one place every request passes through:

* images never travel inside ``tool`` messages (the API does not accept them there): an image a
  tool produced is sent in a user message right after the block of tool results;
* a tool result without its assistant call is dropped, and an assistant call without its result
  gets a stub result, so a request is never rejected for an orphaned pair.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from app.logger import logger
from app.schema import ROLE_VALUES, Function, Message, ToolCall
from app.tool.arguments import normalize_arguments

__all__ = [
    "IMAGE_OMITTED_NOTE",
    "format_messages",
    "image_part",
    "message_from_response",
]

IMAGE_OMITTED_NOTE = "[an image was omitted here: model '{model}' is not configured for images]"
_TOOL_IMAGES_INTRO = "Image(s) produced by the tool call(s) above:"
_NOT_EXECUTED = "Error: this tool call was not executed (the step was interrupted)."
_WIRE_KEYS = ("role", "content", "tool_calls", "name", "tool_call_id")


def image_part(image: str, detail: str | None = None) -> dict[str, Any]:
    """An ``image_url`` content part from a URL, a data URL or bare base64 data."""
    if image.startswith(("http://", "https://", "data:")):
        url = image
    else:
        url = f"data:{_media_type(image)};base64,{image}"
    part: dict[str, Any] = {"type": "image_url", "image_url": {"url": url}}
    if detail:
        part["image_url"]["detail"] = detail
    return part


def _media_type(b64: str) -> str:
    if b64.startswith("iVBOR"):
        return "image/png"
    if b64.startswith("R0lGOD"):
        return "image/gif"
    if b64.startswith("UklGR"):
        return "image/webp"
    return "image/jpeg"


def _as_dict(message: Message | dict[str, Any]) -> dict[str, Any]:
    if isinstance(message, Message):
        return message.to_dict()
    if isinstance(message, dict):
        if "role" not in message:
            raise ValueError("A message dict must have a 'role' key")
        return message
    raise TypeError(f"Messages must be Message objects or dicts, not {type(message).__name__}")


def format_messages(
    messages: Iterable[Message | dict[str, Any]],
    *,
    supports_images: bool = True,
    model: str = "",
) -> tuple[list[dict[str, Any]], int]:
    """Wire-format ``messages``; returns them and the number of images left out.

    Images are left out (replaced by a visible note) only when ``supports_images`` is False;
    the caller decides whether that is a warning or an error.
    """
    out: list[dict[str, Any]] = []
    pending_calls: list[str] = []  # ids of the last assistant message's calls not yet answered
    tool_images: list[str] = []
    omitted = 0

    def flush_tool_block() -> None:
        nonlocal omitted
        for call_id in pending_calls:
            out.append({"role": "tool", "tool_call_id": call_id, "content": _NOT_EXECUTED})
        pending_calls.clear()
        if tool_images:
            if supports_images:
                parts: list[dict[str, Any]] = [{"type": "text", "text": _TOOL_IMAGES_INTRO}]
                parts.extend(image_part(img) for img in tool_images)
                out.append({"role": "user", "content": parts})
            else:
                omitted += len(tool_images)
            tool_images.clear()

    for raw in messages:
        msg = _as_dict(raw)
        role = msg["role"]
        role = role.value if hasattr(role, "value") else role
        if role not in ROLE_VALUES:
            raise ValueError(f"Invalid message role: {role!r}")
        image = msg.get("base64_image")
        if role == "tool":
            call_id = msg.get("tool_call_id")
            if call_id not in pending_calls:
                logger.warning(f"Dropping a tool result with no matching tool call ({call_id})")
                continue
            pending_calls.remove(call_id)
            wire = {k: msg[k] for k in _WIRE_KEYS if k in msg and msg[k] is not None}
            wire["role"] = "tool"
            if image:
                tool_images.append(image)
                if not supports_images:
                    wire["content"] = f"{wire.get('content') or ''}\n" + \
                        IMAGE_OMITTED_NOTE.format(model=model)
            out.append(wire)
            continue
        flush_tool_block()
        wire = {k: v for k, v in msg.items() if k != "base64_image" and v is not None}
        wire["role"] = role
        if image:
            if supports_images:
                wire["content"] = _with_image(wire.get("content"), image)
            else:
                omitted += 1
                wire["content"] = _append_text(wire.get("content"),
                                               IMAGE_OMITTED_NOTE.format(model=model))
        if not supports_images and isinstance(wire.get("content"), list):
            wire["content"], dropped = _strip_image_parts(wire["content"], model)
            omitted += dropped
        out.append(wire)
        if role == "assistant" and wire.get("tool_calls"):
            pending_calls.extend(call.get("id") for call in wire["tool_calls"])
    flush_tool_block()
    return out, omitted


def _with_image(content: Any, image: str) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]]
    if content is None or content == "":
        parts = []
    elif isinstance(content, str):
        parts = [{"type": "text", "text": content}]
    else:
        parts = list(content)
    parts.append(image_part(image))
    return parts


def _append_text(content: Any, note: str) -> Any:
    if content is None or content == "":
        return note
    if isinstance(content, str):
        return f"{content}\n{note}"
    return [*content, {"type": "text", "text": note}]


def _strip_image_parts(parts: list[Any], model: str) -> tuple[list[Any], int]:
    kept, dropped = [], 0
    for part in parts:
        if isinstance(part, dict) and part.get("type") == "image_url":
            dropped += 1
            kept.append({"type": "text", "text": IMAGE_OMITTED_NOTE.format(model=model)})
        else:
            kept.append(part)
    return kept, dropped


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
