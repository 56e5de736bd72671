"""Our messages in the Messages API's form.

System messages become the top-level ``system`` blocks; tool results become user-role
``tool_result`` blocks right after the calls they answer (``is_error`` kept); an assistant turn
sends its own thinking blocks back first, unchanged, then its text and ``tool_use`` blocks;
images become base64 sources (media type read from the bytes) or URL sources. Turns of one role
in a row are merged, since the API wants user and assistant turns alternating, starting with a
user turn.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from app.llm.arguments import parse_arguments
from app.schema import ImagePart, Message, ThinkingBlock

#: ``ThinkingBlock.provider`` of the blocks this API returns (and accepts back).
PROVIDER = "anthropic"

#: The result a call gets when its step ended before the call ran (the API wants one).
NOT_EXECUTED = "Error: this tool call was not executed (the step was interrupted)."
#: Stands in for the start of a history whose first user turn was trimmed away.
EARLIER_LEFT_OUT = "(The earlier part of this conversation was left out.)"

_ID_INVALID = re.compile(r"[^a-zA-Z0-9_-]")
_DATA_URL = re.compile(
    r"^data:(?P<type>[\w.+-]+/[\w.+-]+)?(?:;[^,;]*)*?;base64,(?P<data>.*)$", re.S
)
_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


@dataclass(slots=True)
class Conversation:
    """A request's ``system`` blocks and its alternating ``messages`` (fresh dicts per call:
    the cache breakpoints are marked on them)."""

    system: list[dict[str, Any]] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)


def format_conversation(messages: Sequence[Message]) -> Conversation:
    """The conversation as the API takes it (see the module docstring)."""
    out = Conversation()
    pending: dict[str, None] = {}  # the last assistant turn's calls still unanswered

    def answer_pending() -> None:
        for call_id in pending:
            _add(out.messages, "user", [_tool_result(call_id, NOT_EXECUTED, (), is_error=True)])
        pending.clear()

    for message in messages:
        role = message.role
        if role == "system":
            if _has_text(message.content):
                out.system.append({"type": "text", "text": message.content})
        elif role == "assistant":
            answer_pending()
            blocks = _assistant_blocks(message)
            pending.update((block["id"], None) for block in blocks if block["type"] == "tool_use")
            _add(out.messages, "assistant", blocks)
        elif role == "tool":
            call_id = wire_id(message.tool_call_id or "")
            images = _images_of(message)
            if call_id in pending:
                del pending[call_id]
                block = _tool_result(call_id, message.content, images, is_error=message.is_error)
                _add(out.messages, "user", [block])
            else:  # its call is not in the turn before (trimmed, edited): kept as text
                head = f"[Result of {message.name or 'a tool'} call {message.tool_call_id or '?'}]"
                text = f"{head}\n{message.content or ''}"
                _add(out.messages, "user", [_text(text), *images])
        else:
            answer_pending()
            blocks = [_text(message.content)] if _has_text(message.content) else []
            _add(out.messages, "user", [*blocks, *_images_of(message)])
    answer_pending()
    if out.messages and out.messages[0]["role"] != "user":
        out.messages.insert(0, {"role": "user", "content": [_text(EARLIER_LEFT_OUT)]})
    return out


def wire_id(call_id: str) -> str:
    """A call id as the API accepts it (letters, digits, ``_`` and ``-``): ids written by
    other models (``functions.add:0``) are made to fit, the same way on both sides."""
    return _ID_INVALID.sub("_", call_id) or "call"


def thinking_param(block: ThinkingBlock) -> dict[str, Any] | None:
    """A kept thinking block as sent back; None when it is not this API's or is incomplete."""
    if block.provider != PROVIDER:
        return None
    if block.data is not None:
        return {"type": "redacted_thinking", "data": block.data}
    if block.signature is None:
        return None
    return {"type": "thinking", "thinking": block.text, "signature": block.signature}


def image_block(image: str) -> dict[str, Any]:
    """An ``image`` block from an http(s) URL, a ``data:`` URL or bare base64 data."""
    if image.startswith(("http://", "https://")):
        return {"type": "image", "source": {"type": "url", "url": image}}
    declared = None
    match = _DATA_URL.match(image)
    if match:
        declared, image = match.group("type"), match.group("data")
    data = "".join(image.split())
    media_type = sniff_media_type(data) or declared or "image/png"
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": media_type, "data": data},
    }


def sniff_media_type(data: str) -> str | None:
    """The image type of base64 ``data`` from its first bytes (None when not recognised)."""
    head = data[:24]
    try:
        raw = base64.b64decode(head + "=" * (-len(head) % 4))
    except (binascii.Error, ValueError):
        return None
    if raw[:4] == b"RIFF" and raw[8:12] == b"WEBP":
        return "image/webp"
    return next((kind for magic, kind in _MAGIC if raw.startswith(magic)), None)


def _add(turns: list[dict[str, Any]], role: str, blocks: list[dict[str, Any]]) -> None:
    if not blocks:
        return
    if turns and turns[-1]["role"] == role:
        content = turns[-1]["content"]
        if blocks[0]["type"] == "tool_result":  # results go first in their turn
            at = next((i for i, b in enumerate(content) if b["type"] != "tool_result"), None)
            if at is not None:
                content[at:at] = blocks
                return
        content.extend(blocks)
    else:
        turns.append({"role": role, "content": blocks})


def _assistant_blocks(message: Message) -> list[dict[str, Any]]:
    blocks = [param for block in message.thinking_blocks or () if (param := thinking_param(block))]
    if _has_text(message.content):
        blocks.append(_text(message.content))
    for call in message.tool_calls or ():
        blocks.append(
            {
                "type": "tool_use",
                "id": wire_id(call.id),
                "name": call.function.name,
                "input": _input_of(call.function.arguments),
            }
        )
    return blocks


def _input_of(arguments: str) -> dict[str, Any]:
    """A call's arguments as the object the API wants; text that is no JSON object (a call
    the tool refused) is kept under ``raw_arguments``, so the history still shows it."""
    try:
        return parse_arguments(arguments)
    except ValueError:
        return {"raw_arguments": arguments}


def _tool_result(
    call_id: str, content: str | None, images: Sequence[dict[str, Any]], *, is_error: bool
) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id}
    parts = [_text(content)] if _has_text(content) else []
    parts.extend(images)
    if parts:
        block["content"] = parts
    if is_error:
        block["is_error"] = True
    return block


def _images_of(message: Message) -> list[dict[str, Any]]:
    images = [image_block(message.base64_image)] if message.base64_image else []
    images.extend(image_block(part.url) for part in message.images or () if _usable(part))
    return images


def _usable(part: ImagePart) -> bool:
    return bool(part.url and part.url.strip())


def _text(text: str | None) -> dict[str, Any]:
    return {"type": "text", "text": text or ""}


def _has_text(text: str | None) -> bool:
    """The API refuses text blocks that are empty or only whitespace."""
    return bool(text and not text.isspace())
