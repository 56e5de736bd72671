"""Elicitation: an MCP server asks the *user* for input, through ``ask_human``'s provider (so
a UI that answers the agent's questions answers the servers' too). A form is shown as its
fields; the answer (a JSON object, or the bare value of a one-field form, ``decline``,
``cancel``) is checked against the requested schema, and a wrong one asked again a few times.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["ElicitationAnswer", "check_answer", "describe_form", "parse_answer"]

DECLINE_WORDS = frozenset({"decline", "no", "refuse", "deny"})
CANCEL_WORDS = frozenset({"", "cancel", "skip", "dismiss"})
_TRUE = frozenset({"true", "yes", "y", "1", "on"})
_FALSE = frozenset({"false", "no", "n", "0", "off"})


@dataclass(frozen=True)
class ElicitationAnswer:
    """What the user chose: ``accept`` (with ``content`` for a form), ``decline`` or ``cancel``."""

    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Any] | None = None


def describe_form(server_id: str, message: str, schema: dict[str, Any]) -> str:
    """The question put to the person: the server's message, the fields and how to answer."""
    properties = _properties(schema)
    required = set(schema.get("required") or [])
    lines = [f"MCP server '{server_id}' asks: {message}"]
    for name, spec in properties.items():
        kind = _kind(spec)
        extras = []
        choices = _choices(spec)
        if choices:
            extras.append("one of " + ", ".join(choices))
        if "default" in spec:
            extras.append(f"default {json.dumps(spec['default'])}")
        for key, word in (("minimum", "min"), ("maximum", "max")):
            if key in spec:
                extras.append(f"{word} {spec[key]}")
        detail = f" — {spec['description']}" if spec.get("description") else ""
        flag = "required" if name in required else "optional"
        more = f"; {'; '.join(extras)}" if extras else ""
        lines.append(f"  - {name} ({kind}, {flag}{more}){detail}")
    if len(properties) == 1:
        how = "Type the value"
    elif properties:
        how = 'Answer with a JSON object such as {"field": value}'
    else:
        how = "Type ok to agree"
    lines.append(f"{how}; 'decline' to refuse; 'cancel' or an empty line to dismiss.")
    return "\n".join(lines)


def parse_answer(text: str | None, schema: dict[str, Any]) -> ElicitationAnswer | str:
    """The person's reply as an answer, or a message saying what is wrong with it."""
    if text is None:
        return ElicitationAnswer("cancel")
    reply = text.strip()
    word = reply.lower()
    if word in CANCEL_WORDS:
        return ElicitationAnswer("cancel")
    if word in DECLINE_WORDS:
        return ElicitationAnswer("decline")
    properties = _properties(schema)
    if not properties:
        return ElicitationAnswer("accept", {})
    values: dict[str, Any]
    if reply.startswith("{"):
        try:
            parsed = json.loads(reply)
        except json.JSONDecodeError as e:
            return f"That is not valid JSON ({e.msg})."
        if not isinstance(parsed, dict):
            return "Answer with a JSON object."
        values = parsed
    elif len(properties) == 1:
        name, spec = next(iter(properties.items()))
        values = {name: _from_text(reply, spec)}
    else:
        return 'This form has several fields: answer with a JSON object, e.g. {"field": value}.'
    problem = check_answer(values, schema)
    if problem:
        return problem
    return ElicitationAnswer("accept", _with_defaults(values, properties))


def check_answer(values: dict[str, Any], schema: dict[str, Any]) -> str | None:
    """What is wrong with ``values`` for ``schema`` (the flat subset elicitation allows)."""
    properties = _properties(schema)
    problems = []
    unknown = sorted(set(values) - set(properties))
    if unknown:
        problems.append(f"unknown field(s): {', '.join(unknown)}")
    for name in schema.get("required") or []:
        if name in properties and values.get(name) is None and "default" not in properties[name]:
            problems.append(f"'{name}' is required")
    for name, value in values.items():
        spec = properties.get(name)
        if spec is None or value is None:
            continue
        problem = _check_value(value, spec)
        if problem:
            problems.append(f"'{name}' {problem}")
    return "; ".join(problems) + "." if problems else None


def _properties(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(props, dict):
        return {}
    return {str(k): v for k, v in props.items() if isinstance(v, dict)}


def _kind(spec: dict[str, Any]) -> str:
    kind = spec.get("type")
    if kind == "array":
        return "list"
    fmt = spec.get("format")
    return f"{kind}, {fmt}" if isinstance(kind, str) and fmt else str(kind or "any")


def _choices(spec: dict[str, Any]) -> list[str]:
    """Allowed values (``enum``, ``oneOf``/``anyOf`` consts, or the items' for a list)."""
    source = spec.get("items") if spec.get("type") == "array" else spec
    if not isinstance(source, dict):
        return []
    if isinstance(source.get("enum"), list):
        return [str(v) for v in source["enum"]]
    options = source.get("oneOf") or source.get("anyOf")
    if isinstance(options, list):
        return [str(o["const"]) for o in options if isinstance(o, dict) and "const" in o]
    return []


def _from_text(text: str, spec: dict[str, Any]) -> Any:
    """A plain-text answer converted to the field's type where it is unambiguous."""
    kind = spec.get("type")
    if kind == "boolean":
        word = text.lower()
        return True if word in _TRUE else False if word in _FALSE else text
    if kind in ("integer", "number"):
        try:
            number = float(text)
        except ValueError:
            return text
        return int(number) if kind == "integer" and number.is_integer() else number
    if kind == "array":
        return [part.strip() for part in text.split(",") if part.strip()]
    return text


def _check_value(value: Any, spec: dict[str, Any]) -> str | None:
    kind = spec.get("type")
    if kind == "string":
        if not isinstance(value, str):
            return "must be text"
        if len(value) < spec.get("minLength", 0):
            return f"breaks minLength {spec['minLength']}"
        if len(value) > spec.get("maxLength", len(value)):
            return f"breaks maxLength {spec['maxLength']}"
    elif kind == "boolean":
        if not isinstance(value, bool):
            return "must be true or false"
    elif kind in ("integer", "number"):
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"must be a{'n integer' if kind == 'integer' else ' number'}"
        if kind == "integer" and not float(value).is_integer():
            return "must be an integer"
        if "minimum" in spec and value < spec["minimum"]:
            return f"must be at least {spec['minimum']}"
        if "maximum" in spec and value > spec["maximum"]:
            return f"must be at most {spec['maximum']}"
    elif kind == "array":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            return "must be a list of strings"
        if "minItems" in spec and len(value) < spec["minItems"]:
            return f"needs at least {spec['minItems']} item(s)"
        if "maxItems" in spec and len(value) > spec["maxItems"]:
            return f"takes at most {spec['maxItems']} item(s)"
        choices = _choices(spec)
        bad = [v for v in value if choices and v not in choices]
        if bad:
            return f"has {', '.join(bad)}, not among {', '.join(choices)}"
        return None
    choices = _choices(spec)
    if choices and str(value) not in choices:
        return f"must be one of {', '.join(choices)}"
    return None


def _with_defaults(values: dict[str, Any], properties: dict[str, dict[str, Any]]) -> dict[str, Any]:
    filled = {k: v for k, v in values.items() if v is not None}
    for name, spec in properties.items():
        if name not in filled and "default" in spec:
            filled[name] = spec["default"]
    return filled
