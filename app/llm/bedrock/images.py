"""Images as Converse ``image`` blocks: inline bytes only (Bedrock fetches no URL), in one of
the four formats it takes, told by the bytes themselves rather than by a label that may lie."""

from __future__ import annotations

import base64
import binascii

from app.exceptions import LLMBadRequestError

#: Formats Converse accepts, by their files' first bytes.
_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", "png"),
    (b"\xff\xd8\xff", "jpeg"),
    (b"GIF87a", "gif"),
    (b"GIF89a", "gif"),
)


def image_format(data: bytes) -> str | None:
    """``png``, ``jpeg``, ``gif`` or ``webp`` for an image's bytes, else None."""
    for signature, name in _SIGNATURES:
        if data.startswith(signature):
            return name
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    return None


def is_remote(url: str) -> bool:
    """An ``http(s)://`` image, which Bedrock cannot fetch."""
    return url[:8].lower().startswith(("http://", "https://"))


def image_block(source: str, *, model: str) -> dict[str, object]:
    """The ``image`` block of a ``data:`` URL or bare base64 (checked, re-encoded as sent:
    Converse's JSON carries the bytes as base64)."""
    payload = source
    if source[:5].lower() == "data:":
        header, comma, payload = source.partition(",")
        if not comma or ";base64" not in header.lower():
            raise LLMBadRequestError(
                f"An image for model '{model}' is a data: URL without base64 data", model=model
            )
    try:
        data = base64.b64decode("".join(payload.split()), validate=True)
    except (binascii.Error, ValueError) as e:
        raise LLMBadRequestError(
            f"An image for model '{model}' is neither a data: URL nor valid base64 ({e})",
            model=model,
        ) from e
    kind = image_format(data)
    if kind is None:
        raise LLMBadRequestError(
            f"An image for model '{model}' is not PNG, JPEG, GIF or WebP (the formats Bedrock "
            f"takes; it starts with {data[:8]!r})",
            model=model,
        )
    return {"image": {"format": kind, "source": {"bytes": base64.b64encode(data).decode("ascii")}}}


def remote_note(url: str) -> dict[str, str]:
    """A text block standing for an image URL (sent in its place, so nothing is silent)."""
    return {"text": f"[An image at {url} was not sent: Bedrock takes inline images only.]"}
