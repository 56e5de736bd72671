"""Tool-call arguments as models really send them: a JSON string, a dict, or JSON-in-JSON;
decoded at the model layer's edge. Nesting too deep for the parser is a decoding error like
any other, never a ``RecursionError`` escaping into the agent.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic_core import from_json

from app.text import clean_tree

#: What the model is told when its arguments nest deeper than the JSON parser can follow.
TOO_DEEP = "arguments too deeply nested"
_DEEP_DETAIL = "JSON nested too deeply to decode"

_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)


def loads_safely(text: str | bytes) -> Any:
    """``json.loads`` whose every failure (nesting too deep included) is a ``ValueError``.
    pydantic-core's faster parser reads first; what it refuses goes to ``json.loads``, so what
    is accepted, and the error for what is not, are the standard library's."""
    try:
        return from_json(text)
    except (ValueError, TypeError):  # TypeError: a str holding a lone surrogate itself
        pass
    try:
        value = json.loads(text)
    except RecursionError as e:
        raise ValueError(_DEEP_DETAIL) from e
    # The standard library decodes a lone surrogate escape (``"\\ud800"``) into a string that
    # has no UTF-8 encoding: made valid here, where the model's text enters.
    return clean_tree(value)


def parse_arguments(raw: Any) -> dict[str, Any]:
    """Decode arguments into a dict; raise ``ValueError`` with a message the model can act on."""
    if raw is None:
        return {}
    if isinstance(raw, dict):
        return raw
    if not isinstance(raw, str):
        raise ValueError(f"arguments must be a JSON object, got {type(raw).__name__}")
    text = raw.strip()
    if not text:
        return {}
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    try:
        value = loads_safely(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"arguments are not valid JSON ({e.msg} at position {e.pos})") from e
    except ValueError as e:
        if str(e) == _DEEP_DETAIL:
            raise ValueError(f"{TOO_DEEP} ({_DEEP_DETAIL})") from e
        raise ValueError(f"arguments are not usable JSON ({e})") from e
    if isinstance(value, str):  # double-encoded: a JSON string holding the JSON object
        try:
            value = loads_safely(value)
        except ValueError as e:
            raise ValueError("arguments are a JSON string, not a JSON object") from e
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"arguments must be a JSON object, got {type(value).__name__}")
    return value


def normalize_arguments(raw: Any) -> str:
    """The JSON-object text of ``raw``: kept as sent when it already is one, re-encoded when it
    came as a dict, fenced or double-encoded, and left unchanged when it cannot be decoded (so
    the agent can show the model exactly what it sent)."""
    if raw is None:
        return "{}"
    if not isinstance(raw, str):
        try:
            return json.dumps(raw, ensure_ascii=False)
        except (TypeError, ValueError, RecursionError):
            return str(raw)
    try:
        if isinstance(loads_safely(raw), dict):
            return raw
    except ValueError:
        pass
    try:
        return json.dumps(parse_arguments(raw), ensure_ascii=False)
    except (ValueError, RecursionError):
        return raw
