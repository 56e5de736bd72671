"""Tool-call arguments as models really send them: a JSON string, a dict, or JSON-in-JSON."""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["TOO_DEEP", "normalize_arguments", "parse_arguments"]

#: What the model is told when its arguments nest deeper than the JSON parser can follow.
TOO_DEEP = "arguments too deeply nested"

_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)


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
    value = _loads(text)
    if isinstance(value, str):  # double-encoded: a JSON string holding the JSON object
        try:
            value = _loads(value)
        except ValueError as e:
            raise ValueError("arguments are a JSON string, not a JSON object") from e
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"arguments must be a JSON object, got {type(value).__name__}")
    return value


def _loads(text: str) -> Any:
    """``json.loads`` whose every failure is a ``ValueError`` the model can read; nesting
    deep enough to exhaust the parser's recursion is refused, not a crash."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"arguments are not valid JSON ({e.msg} at position {e.pos})") from e
    except RecursionError as e:
        raise ValueError(TOO_DEEP) from e


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
            # Not JSON on purpose: parsing it tells the model, and no tool runs without args.
            return f"<{TOO_DEEP}>"
    try:
        if isinstance(json.loads(raw), dict):
            return raw
    except (json.JSONDecodeError, RecursionError):
        pass
    try:
        return json.dumps(parse_arguments(raw), ensure_ascii=False)
    except ValueError:
        return raw
