"""The one redactor for every outward channel (terminal, events, web UI, AG-UI, A2A, traces,
sessions): configured secrets in any encoding, and anything shaped like a credential, replaced
by ``***``; the result is valid UTF-8 (a lone surrogate cannot be sent or printed)."""

from __future__ import annotations

from typing import Any

from app.logger import redact
from app.text import clean_text


def redact_text(text: str, max_chars: int | None = None) -> str:
    """``text`` redacted and cleaned; cut to ``max_chars`` with a note when longer."""
    cleaned = clean_text(redact(text))
    if max_chars is not None and len(cleaned) > max_chars:
        return cleaned[:max_chars] + "\n…(cut)"
    return cleaned


def redact_tree(value: Any, max_chars: int | None = None) -> Any:
    """``value`` with every string redacted (dicts, lists and tuples walked; keys too)."""
    if isinstance(value, str):
        return redact_text(value, max_chars)
    if isinstance(value, dict):
        return {redact_text(str(k)): redact_tree(v, max_chars) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_tree(v, max_chars) for v in value]
    return value
