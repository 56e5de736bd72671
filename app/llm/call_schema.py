"""The JSON schema of "one call of one offered tool", in the subset every constrained decoder
handles, and the checks around it (docs/local-models.md, "Constrained tool calling").

A server turns the schema into a grammar, and a schema it cannot convert is dropped silently
(llama-cpp-python falls back to plain JSON) or crashes it. So a tool's schema is first reduced
to a small subset (:func:`arguments_schema`): ``type``, ``properties``/``required`` (objects
closed), ``items``, ``enum``, ``const``, ``anyOf``, with names and literals a grammar can hold
and bounded size and depth. Whatever is dropped only loosens the constraint: the tool still
checks its arguments. :func:`check_schema` verifies a schema is in the subset before it is sent,
:func:`problems` validates a value against it, :func:`read_json` reads an answer leniently (raw
newlines inside strings, text after the object).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from app.llm.model import ToolDefinition

#: JSON types of the subset.
TYPES = ("string", "integer", "number", "boolean", "null", "object", "array")
#: Any JSON value. Never ``{}``: llama-cpp-python's converter reads an empty schema as "any
#: object".
ANY: dict[str, Any] = {"type": ["string", "number", "boolean", "object", "array", "null"]}
#: Nesting followed into a schema; deeper parts accept any value.
MAX_DEPTH = 6
#: Schema nodes kept per tool; the rest accept any value (a grammar grows with the schema).
MAX_NODES = 400
#: Alternatives of an ``anyOf`` and values of an ``enum`` kept (more: the node loosens).
MAX_CHOICES = 32
#: Characters of an answer read for a call (constrained answers are short).
MAX_ANSWER = 1 << 20

#: Text a grammar literal can hold as is: no quote, backslash or control character
#: (llama-cpp-python escapes only quotes and newlines in the literals it writes).
_SAFE = re.compile(r'[^"\\\x00-\x1f\x7f]{1,256}')
_SCALARS = (str, int, float, bool, type(None))


def safe_text(value: Any) -> bool:
    """Whether ``value`` is a string a grammar literal can hold."""
    return isinstance(value, str) and _SAFE.fullmatch(value) is not None


def _safe_literal(value: Any) -> bool:
    if isinstance(value, str):
        return safe_text(value) or value == ""
    if isinstance(value, float):
        return value == value and value not in (float("inf"), float("-inf"))
    return isinstance(value, _SCALARS)


def _type_of(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "null" if value is None else "object" if isinstance(value, dict) else "array"


class _Reducer:
    """One tool schema reduced to the subset, within a node budget."""

    def __init__(self, root: Any) -> None:
        self.root = root
        self.nodes = MAX_NODES

    def resolve(self, ref: Any, seen: frozenset[str]) -> Any:
        """A local ``$ref`` (``#/$defs/x``), None when it leads nowhere or back to itself."""
        if not isinstance(ref, str) or not ref.startswith("#") or ref in seen:
            return None
        node: Any = self.root
        for part in [p for p in ref[1:].split("/") if p]:
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, dict) or part not in node:
                return None
            node = node[part]
        return node

    def reduce(self, schema: Any, depth: int, seen: frozenset[str] = frozenset()) -> dict[str, Any]:
        self.nodes -= 1
        if not isinstance(schema, dict) or depth > MAX_DEPTH or self.nodes <= 0:
            return dict(ANY)
        if "$ref" in schema:
            target = self.resolve(schema["$ref"], seen)
            if not isinstance(target, dict):
                return dict(ANY)
            return self.reduce(target, depth + 1, seen | {schema["$ref"]})
        if isinstance(schema.get("allOf"), list):
            merged = _merged([schema, *schema["allOf"]])
            return self.reduce(merged, depth + 1, seen) if merged is not None else dict(ANY)
        union = schema.get("anyOf", schema.get("oneOf"))
        if isinstance(union, list) and union:
            alternatives = [self.reduce(s, depth + 1, seen) for s in union[:MAX_CHOICES]]
            if len(union) > MAX_CHOICES or any(a == ANY for a in alternatives):
                return dict(ANY)
            return alternatives[0] if len(alternatives) == 1 else {"anyOf": alternatives}
        if "const" in schema:
            value = schema["const"]
            return {"const": value} if _safe_literal(value) else {"type": _type_of(value)}
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            values = list(dict.fromkeys(v for v in schema["enum"] if isinstance(v, _SCALARS)))
            if len(values) == len(schema["enum"]) <= MAX_CHOICES and all(
                map(_safe_literal, values)
            ):
                return {"enum": values}
            seen_kinds = sorted({_type_of(v) for v in schema["enum"]}, key=TYPES.index)
            return {"type": seen_kinds[0] if len(seen_kinds) == 1 else seen_kinds}
        kinds = self.kinds(schema)
        if kinds is None:
            return dict(ANY)
        if len(kinds) > 1:
            return {"type": kinds}
        kind = kinds[0]
        if kind == "object":
            return self.object(schema, depth, seen)
        if kind == "array" and isinstance(schema.get("items"), dict):
            return {"type": "array", "items": self.reduce(schema["items"], depth + 1, seen)}
        return {"type": kind}

    @staticmethod
    def kinds(schema: dict[str, Any]) -> list[str] | None:
        """The node's JSON types (None: any value)."""
        kind = schema.get("type")
        if kind is None:
            if "properties" in schema:
                kind = "object"
            elif "items" in schema:
                kind = "array"
            else:
                return None
        listed = kind if isinstance(kind, list) else [kind]
        kinds = [k for k in TYPES if k in listed]  # canonical order, unknown names dropped
        if schema.get("nullable") is True and "null" not in kinds:
            kinds.append("null")
        if not kinds:
            return None
        if "number" in kinds and "integer" in kinds:
            kinds.remove("integer")
        return kinds

    def object(self, schema: dict[str, Any], depth: int, seen: frozenset[str]) -> dict[str, Any]:
        properties = schema.get("properties")
        if not isinstance(properties, dict) or not all(map(safe_text, properties)):
            return {"type": "object"}  # any object: the names cannot be written as literals
        reduced = {name: self.reduce(s, depth + 1, seen) for name, s in properties.items()}
        required = schema.get("required")
        names = [n for n in required if n in reduced] if isinstance(required, list) else []
        # Required ones first (in the properties' order): a grammar writes the properties in
        # this order, and the short identifying ones come before optional free text.
        first = [n for n in reduced if n in names]
        reduced = {n: reduced[n] for n in [*first, *(n for n in reduced if n not in names)]}
        node: dict[str, Any] = {"type": "object", "properties": reduced}
        if names:
            node["required"] = list(dict.fromkeys(names))
        return node


def _merged(parts: list[Any]) -> dict[str, Any] | None:
    """An ``allOf`` of object schemas as one object (None when the parts are not all such)."""
    merged: dict[str, Any] = {"type": "object", "properties": {}, "required": []}
    for part in parts:
        if not isinstance(part, dict):
            return None
        rest = {k: v for k, v in part.items() if k != "allOf"}
        if rest.get("type", "object") != "object":
            return None
        props = rest.get("properties", {})
        if not isinstance(props, dict):
            return None
        merged["properties"].update(props)
        if isinstance(rest.get("required"), list):
            merged["required"] += rest["required"]
    return merged


def arguments_schema(parameters: Any) -> dict[str, Any]:
    """A tool's ``parameters`` reduced to the subset: always an object schema."""
    node = _Reducer(parameters).reduce(parameters, 0)
    return node if node.get("type") == "object" else {"type": "object"}


@dataclass(frozen=True, slots=True)
class CallSchema:
    """The schema of one call of one of ``names``, and each tool's reduced arguments."""

    schema: dict[str, Any]
    arguments: dict[str, dict[str, Any]]

    @property
    def names(self) -> list[str]:
        return list(self.arguments)


def call_schema(tools: Sequence[ToolDefinition], tool_choice: Any = "auto") -> CallSchema:
    """``{"name": <const>, "arguments": <its schema>}`` for each tool (an ``anyOf`` when there
    are several; ``tool_choice`` naming one keeps that one). Tools whose name a grammar cannot
    hold are left out. Raises ``ValueError`` when no tool is left."""
    wanted = None
    if isinstance(tool_choice, dict):
        wanted = (tool_choice.get("function") or {}).get("name")
    arguments: dict[str, dict[str, Any]] = {}
    for tool in tools:
        if safe_text(tool.name) and tool.name not in arguments:
            if wanted is None or tool.name == wanted:
                arguments[tool.name] = arguments_schema(tool.parameters)
    if not arguments:
        raise ValueError(
            f"no tool to call: {wanted!r} is not offered" if wanted else "no callable tool"
        )
    calls = [
        {
            "type": "object",
            "properties": {"name": {"const": name}, "arguments": schema},
            "required": ["name", "arguments"],
        }
        for name, schema in arguments.items()
    ]
    root = calls[0] if len(calls) == 1 else {"anyOf": calls}
    check_schema(root)
    return CallSchema(root, arguments)


def check_schema(schema: Any, path: str = "$") -> None:
    """Raise ``ValueError`` naming the first part of ``schema`` outside the subset (what is
    sent must be what every converter handles)."""
    if not isinstance(schema, dict) or not schema:
        raise ValueError(f"{path}: not a non-empty object")
    keys = set(schema)
    if keys == {"anyOf"}:
        options = schema["anyOf"]
        if not isinstance(options, list) or not options or len(options) > 4 * MAX_CHOICES:
            raise ValueError(f"{path}.anyOf: not a short non-empty list")
        for i, option in enumerate(options):
            check_schema(option, f"{path}.anyOf[{i}]")
        return
    if keys == {"const"}:
        if not _safe_literal(schema["const"]):
            raise ValueError(f"{path}.const: not a literal a grammar can hold")
        return
    if keys == {"enum"}:
        values = schema["enum"]
        if not isinstance(values, list) or not values or not all(map(_safe_literal, values)):
            raise ValueError(f"{path}.enum: not a non-empty list of safe literals")
        return
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    if not kinds or any(k not in TYPES for k in kinds) or len(set(kinds)) != len(kinds):
        raise ValueError(f"{path}.type: {kind!r} is not a JSON type (or a list of them)")
    allowed = {"type"}
    if kind == "object" and "properties" in schema:
        allowed |= {"properties", "required", "additionalProperties"}
        properties = schema["properties"]
        if not isinstance(properties, dict):
            raise ValueError(f"{path}.properties: not an object")
        for name, sub in properties.items():
            if not safe_text(name):
                raise ValueError(f"{path}.properties: {name!r} cannot be a grammar literal")
            check_schema(sub, f"{path}.properties.{name}")
        required = schema.get("required", [])
        if not isinstance(required, list) or not set(required) <= set(properties):
            raise ValueError(f"{path}.required: names that are not properties")
        if schema.get("additionalProperties", False) is not False:
            raise ValueError(f"{path}.additionalProperties: objects are closed")
    elif kind == "array" and "items" in schema:
        allowed.add("items")
        check_schema(schema["items"], f"{path}.items")
    if keys - allowed:
        raise ValueError(f"{path}: keywords outside the subset: {sorted(keys - allowed)}")


def problems(value: Any, schema: dict[str, Any], path: str = "arguments") -> list[str]:
    """What in ``value`` does not match ``schema`` (a schema of the subset; objects with
    properties are closed); empty when it matches."""
    if "anyOf" in schema:
        options = [problems(value, option, path) for option in schema["anyOf"]]
        return [] if any(not found for found in options) else min(options, key=len)
    if "const" in schema:
        same = value == schema["const"] and type(value) is type(schema["const"])
        return [] if same else [f"{path} must be {json.dumps(schema['const'])}"]
    if "enum" in schema:
        if any(value == v and type(value) is type(v) for v in schema["enum"]):
            return []
        return [f"{path} must be one of {json.dumps(schema['enum'])}"]
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    actual = _type_of(value)
    if actual not in kinds and not (actual == "integer" and "number" in kinds):
        return [f"{path} must be {' or '.join(map(str, kinds))}, not {actual}"]
    found: list[str] = []
    if actual == "object" and "properties" in schema:
        properties = schema["properties"]
        for name in schema.get("required", ()):
            if name not in value:
                found.append(f"{path}.{name} is missing")
        for name, item in value.items():
            if name not in properties:
                found.append(f"{path}.{name} is not an argument")
            else:
                found += problems(item, properties[name], f"{path}.{name}")
    elif actual == "array" and "items" in schema:
        for i, item in enumerate(value):
            found += problems(item, schema["items"], f"{path}[{i}]")
    return found


def read_json(text: str | None) -> Any:
    """The JSON object an answer starts with (leading prose and trailing text ignored; raw
    newlines and tabs inside strings accepted: some grammars let them through); None when
    there is none."""
    if not text:
        return None
    start = text.find("{", 0, 4096)
    if start < 0 or len(text) > MAX_ANSWER:
        return None
    try:
        value, _ = _LENIENT.raw_decode(text, start)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


_LENIENT = json.JSONDecoder(strict=False)


def call_parts(value: Any, names: Iterable[str]) -> tuple[str, dict[str, Any]] | None:
    """``(name, arguments)`` of a ``{"name": ..., "arguments": {...}}`` value naming one of
    ``names`` (``parameters`` and arguments as a JSON string forgiven); None otherwise."""
    if not isinstance(value, dict):
        return None
    name = value.get("name")
    if not isinstance(name, str) or name not in set(names):
        return None
    arguments = value.get("arguments", value.get("parameters", {}))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments, strict=False)
        except (ValueError, RecursionError):
            return None
    if arguments is None:
        arguments = {}
    return (name, arguments) if isinstance(arguments, dict) else None
