"""Upstream's dict messages at the facade's edge. Upstream callers (and ``ask_with_images``)
pass plain dicts in OpenAI's chat shape (content parts, ``base64_image``); ``LLM`` turns them
into our typed :class:`~app.schema.Message` here, so every model receives only ``Message``s,
and gives upstream's ``format_messages`` view back.

An image becomes an :class:`~app.schema.ImagePart` whose ``url`` is an ``http(s)`` URL or a
``data:`` URL (bare base64 is given its media type here), so no model has to guess.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, cast

from app.schema import ROLE_VALUES, ImagePart, Message, nested_edit_count

#: Media types by the first characters of their base64 (anything else is taken as JPEG).
_MEDIA_TYPES = {"iVBOR": "image/png", "R0lGOD": "image/gif", "UklGR": "image/webp"}
#: What one image weighs in :class:`Measured`'s characters: more than any image costs in
#: tokens (a high-detail image is at most about 1,500), counted as one character a token.
IMAGE_CHARS = 2_000


def image_url(image: str) -> str:
    """A URL or ``data:`` URL as given; bare base64 data as a ``data:`` URL."""
    if image.startswith(("http://", "https://", "data:")):
        return image
    kind = next((k for head, k in _MEDIA_TYPES.items() if image.startswith(head)), "image/jpeg")
    return f"data:{kind};base64,{image}"


def typed(message: Message | dict[str, Any]) -> Message:
    """A message as our type: a dict's text parts joined, its ``image_url`` parts made
    ``images``. A part of another kind (audio, files) is refused: no model here takes it."""
    if isinstance(message, Message):
        return message
    if not isinstance(message, dict):
        raise TypeError(f"Messages must be Message objects or dicts, not {type(message).__name__}")
    if "role" not in message:
        raise ValueError("A message dict must have a 'role' key")
    role = message["role"]
    role = getattr(role, "value", role)
    if role not in ROLE_VALUES:
        raise ValueError(f"Invalid message role: {role!r}")
    content = message.get("content")
    images = [_image_part(image) for image in message.get("images") or ()]
    if isinstance(content, list):
        texts: list[str] = []
        for part in content:
            kind = part.get("type") if isinstance(part, dict) else None
            if isinstance(part, str) or kind == "text":
                texts.append(part if isinstance(part, str) else str(part.get("text") or ""))
            elif kind == "image_url":
                images.append(_image_part(part["image_url"]))
            else:
                raise ValueError(f"Unsupported content part in a {role} message: {kind!r}")
        content = "\n".join(texts) if texts else None
    elif content is not None and not isinstance(content, str):
        raise ValueError(f"A message's content must be text or content parts, not {content!r}")
    fields = {
        key: message[key]
        for key in ("name", "tool_call_id", "base64_image", "is_error", "thinking_blocks")
        if message.get(key) is not None
    }
    calls = message.get("tool_calls")
    if calls:
        fields["tool_calls"] = Message.from_tool_calls(list(calls)).tool_calls
    return Message(role=role, content=content, images=images or None, **fields)


def typed_all(messages: Sequence[Message | dict[str, Any]]) -> list[Message]:
    """The messages as ``Message``s: the same list when it holds nothing else."""
    if isinstance(messages, list) and all(isinstance(m, Message) for m in messages):
        return cast(list[Message], messages)
    return [typed(m) for m in messages]


def _image_part(image: Any) -> ImagePart:
    """An image given as a URL, base64, ``{"url": ...}`` or an ``image_url`` object."""
    if isinstance(image, ImagePart):
        return image
    if isinstance(image, str) and image:
        return ImagePart(url=image_url(image))
    if isinstance(image, dict):
        nested = image.get("image_url")
        url = image.get("url") or (nested.get("url") if isinstance(nested, dict) else nested)
        if not isinstance(url, str) or not url:
            raise ValueError(
                f"An image given as a dict needs a 'url' (or 'image_url.url'), not {image!r}"
            )
        detail = image.get("detail") or (nested.get("detail") if isinstance(nested, dict) else None)
        return ImagePart(url=image_url(url), detail=detail)
    raise ValueError(f"An image must be a URL, base64 data or {{'url': ...}}, not {image!r}")


def attach_images(
    messages: Iterable[Message | dict[str, Any]], images: Sequence[str | dict[str, Any]]
) -> list[Message]:
    """The messages with ``images`` (URLs, data URLs, base64 or ``{"url": ...}``) added to
    the last one, which must be the user's (the caller's messages are not changed)."""
    if not images:
        raise ValueError("ask_with_images needs at least one image")
    out = [typed(message) for message in messages]
    if not out or out[-1].role != "user":
        raise ValueError("The last message must be a user message to attach images to")
    last = out[-1]
    added = [_image_part(image) for image in images]
    out[-1] = last.model_copy(update={"images": [*(last.images or ()), *added]})
    return out


def upstream_dicts(
    messages: Iterable[Message | dict[str, Any]], *, supports_images: bool = True
) -> list[dict[str, Any]]:
    """Upstream's ``format_messages``: plain dicts in OpenAI's chat shape, images as
    ``image_url`` content parts (left out when ``supports_images`` is False)."""
    out = []
    for raw in messages:
        message = typed(raw)
        data = message.to_dict()
        for key in ("base64_image", "images", "is_error", "thinking_blocks"):
            data.pop(key, None)
        urls = [image_url(message.base64_image)] if message.base64_image else []
        urls += [image.url for image in message.images or ()]
        if urls and supports_images:
            parts: list[dict[str, Any]] = (
                [{"type": "text", "text": message.content}] if message.content else []
            )
            parts += [{"type": "image_url", "image_url": {"url": url}} for url in urls]
            data["content"] = parts
        out.append(data)
    return out


def _chars(message: Message) -> int:
    size = len(message.content or "")
    for call in message.tool_calls or ():
        size += len(call.function.name) + len(call.function.arguments)
    images = len(message.images or ()) + (message.base64_image is not None)
    return size + images * IMAGE_CHARS


class Measured:
    """A conversation typed, and its size in characters (``IMAGE_CHARS`` an image), kept up
    to date cheaply: an agent sends its whole history at every step, so a request that
    extends the previous one is measured by its new messages only. The previous request's
    last message is left out of what is kept: an agent's step prompt is a new message at
    every step, after the turns that came since.

    "Extends" is judged in constant time (a step must not pay for its history twice: the
    formatting pass compares it already): the same first message and the same one where the
    kept part ended, and no message edited since. A list whose ends are kept but whose middle
    was replaced is not noticed; the size only decides whether a request is counted for the
    window check (``LLM._check_window``), and the model gets the list as it is.
    """

    __slots__ = ("_chars", "_count", "_first", "_last", "_stamp")

    def __init__(self) -> None:
        self._first: Message | None = None
        self._last: Message | None = None
        self._count = 0
        self._chars = 0
        self._stamp = -1

    def measure(
        self, conversation: Sequence[Message | dict[str, Any]]
    ) -> tuple[list[Message], int]:
        """The conversation as ``Message``s (the same list when it holds nothing else) and
        its size."""
        given = conversation if isinstance(conversation, list) else list(conversation)
        count, stamp = self._count, nested_edit_count()
        start = chars = 0
        if (
            count
            and self._stamp == stamp
            and len(given) >= count
            and given[0] is self._first
            and given[count - 1] is self._last
        ):
            start, chars = count, self._chars
        for index in range(start, len(given)):
            message = given[index]
            if not isinstance(message, Message):
                converted = typed_all(given)  # upstream's dicts: nothing kept
                self._count, self._stamp = 0, -1
                return converted, sum(map(_chars, converted))
            # _chars inline: a step measures its new messages here (two to four).
            chars += len(message.content or "")
            if message.tool_calls or message.images or message.base64_image:
                chars += _chars(message) - len(message.content or "")
        messages = cast(list[Message], given)  # every one checked (or, before start, kept)
        if len(messages) > 1:
            self._first, self._last = messages[0], messages[-2]
            self._count, self._chars = len(messages) - 1, chars - _chars(messages[-1])
            self._stamp = stamp
        return messages, chars
