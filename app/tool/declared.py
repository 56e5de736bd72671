"""Tool arguments declared once, as a pydantic model: the schema and the check in one place.

The schema (:func:`schema_of`, built once per model and shared) is written the way tool schemas
are hand-written, so deriving one changes nothing the model sees: no titles, ``X | None = None``
a plain optional ``X``, nested models inlined, field order kept, ``additionalProperties: false``
only with ``closed_schema``. Calls (:func:`validate_with`) are checked and reported in the words
of ``app.tool.validation`` (see docs/agents.md, "Arguments are checked before the tool runs").
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from app.exceptions import ArgumentProblem, ToolArgumentsError
from app.tool.validation import MAX_PROBLEMS, describe_value


class ToolArgs(BaseModel):
    """Base of a tool's arguments model: unknown arguments refused, no ``nan``/``inf``."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    #: Whether the schema says ``additionalProperties: false`` (unknown arguments are refused
    #: either way; a few upstream schemas spell it out).
    closed_schema: ClassVar[bool] = False

    @model_validator(mode="before")
    @classmethod
    def _as_sent(cls, data: Any) -> Any:
        """``null`` for an optional argument drops it (its default applies); JSON text for an
        array or object argument is decoded."""
        if not isinstance(data, Mapping):
            return data
        fields = cls.model_fields
        containers = _containers(cls)
        out: dict[str, Any] = {}
        for key, value in data.items():
            field = fields.get(key) if isinstance(key, str) else None
            if value is None and field is not None and not field.is_required():
                continue
            if isinstance(value, str) and key in containers and value.strip()[:1] in ("[", "{"):
                try:
                    decoded = json.loads(value)
                except (ValueError, RecursionError):
                    decoded = value
                if isinstance(decoded, list | dict):
                    value = decoded
            out[key] = value
        return out


class ToolSchemaGenerator(GenerateJsonSchema):
    """pydantic's JSON schema written as tool schemas are hand-written (module docstring)."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def model_schema(self, schema: core_schema.ModelSchema) -> JsonSchemaValue:
        json_schema = super().model_schema(schema)
        json_schema.pop("title", None)
        json_schema.pop("description", None)  # a model's docstring is for Python readers
        cls = schema["cls"]
        if json_schema.get("additionalProperties") is False and not getattr(
            cls, "closed_schema", False
        ):
            del json_schema["additionalProperties"]
        return json_schema

    def nullable_schema(self, schema: core_schema.NullableSchema) -> JsonSchemaValue:
        return self.generate_inner(schema["schema"])

    def default_schema(self, schema: core_schema.WithDefaultSchema) -> JsonSchemaValue:
        json_schema = super().default_schema(schema)
        if schema.get("default", ...) is None:
            json_schema.pop("default", None)
        return json_schema

    def dict_schema(self, schema: core_schema.DictSchema) -> JsonSchemaValue:
        json_schema = super().dict_schema(schema)
        if json_schema.get("additionalProperties") is True:
            del json_schema["additionalProperties"]
        return json_schema


class _Frozen:
    """Editing in place raises; deep copies and pickles are plain, editable containers."""

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(
            "this tool schema is derived from the tool's Args model and shared; assign a new "
            "dict to `parameters` instead of editing it in place"
        )

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return _thaw(self)

    def __reduce__(self) -> Any:
        return (_thaw, (_thaw(self),))


class FrozenSchema(_Frozen, dict[str, Any]):
    """A derived schema, shared by every instance of a tool class: read like a dict, never
    edited in place (assign a new dict to ``parameters`` instead)."""

    __setitem__ = __delitem__ = __ior__ = _Frozen._refuse
    clear = pop = popitem = setdefault = update = _Frozen._refuse

    def __copy__(self) -> dict[str, Any]:
        return dict(self)


class _FrozenList(_Frozen, list[Any]):
    """A list inside a ``FrozenSchema`` (equal to the same plain list; not editable)."""

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _Frozen._refuse
    append = extend = insert = remove = pop = clear = sort = reverse = _Frozen._refuse

    def __copy__(self) -> list[Any]:
        return list(self)


def _freeze(node: Any) -> Any:
    if isinstance(node, dict):
        frozen = FrozenSchema()
        for key, value in node.items():
            dict.__setitem__(frozen, key, _freeze(value))
        return frozen
    if isinstance(node, list):
        return _FrozenList(_freeze(item) for item in node)
    return node


def _thaw(node: Any) -> Any:
    if isinstance(node, dict):
        return {key: _thaw(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_thaw(item) for item in node]
    return node


@functools.cache
def schema_of(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema ``model`` is offered as: built once per model, then the same read-only
    dict (a ``FrozenSchema``: every tool of a class shares it, so nobody may edit it)."""
    raw = model.model_json_schema(schema_generator=ToolSchemaGenerator)
    return _freeze(_inline(raw, raw.pop("$defs", {}), 0))


def _inline(node: Any, defs: Mapping[str, Any], depth: int) -> Any:
    """``node`` with local ``$ref``s replaced by their definitions (tool schemas are flat)."""
    if isinstance(node, list):
        return [_inline(item, defs, depth) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/") and depth < 8:
        target = dict(defs.get(ref.removeprefix("#/$defs/"), {}))
        target.update({k: v for k, v in node.items() if k != "$ref"})
        return _inline(target, defs, depth + 1)
    out = {"type": node["type"]} if "type" in node else {}  # "type" first, as people write it
    out.update((key, _inline(value, defs, depth)) for key, value in node.items())
    return out


@functools.cache
def _containers(model: type[BaseModel]) -> frozenset[str]:
    """The fields of ``model`` whose schema is an array or an object."""
    return frozenset(
        name
        for name, sub in schema_of(model).get("properties", {}).items()
        if isinstance(sub, Mapping) and sub.get("type") in ("array", "object")
    )


def validate_with(
    model: type[BaseModel], tool: str, arguments: Mapping[str, Any]
) -> dict[str, Any]:
    """The arguments validated (and converted) by ``model``, as keywords for ``execute``;
    raises ``ToolArgumentsError`` naming each field that does not fit."""
    if not isinstance(arguments, Mapping):
        problem = ArgumentProblem(
            "(arguments)", f"expected an object, got {describe_value(arguments)}"
        )
        raise ToolArgumentsError(tool, (problem,))
    try:
        checked = model.model_validate(arguments)
    except ValidationError as e:
        errors = e.errors(include_url=False, include_context=True)
        schema = schema_of(model)
        problems = tuple(_problem(schema, err) for err in errors[:MAX_PROBLEMS])
        raise ToolArgumentsError(tool, problems, len(errors)) from None
    return {name: getattr(checked, name) for name in type(checked).model_fields}


#: pydantic error types that mean "wrong type or value": reported as "expected X, got Y".
_TYPE_ERRORS = frozenset(
    "string_type int_type int_parsing int_from_float float_type float_parsing finite_number "
    "bool_type bool_parsing list_type dict_type model_type model_attributes_type literal_error "
    "enum".split()
)


def _problem(schema: Mapping[str, Any], err: Any) -> ArgumentProblem:
    loc = tuple(err.get("loc", ()))
    kind = err.get("type", "")
    path = _render(loc)
    node = _node_at(schema, loc)
    if kind == "missing":
        expected = f"; expected {_describe(node)}" if node else ""
        return ArgumentProblem(path, f"missing required argument{expected}")
    if kind == "extra_forbidden":
        parent = _node_at(schema, loc[:-1]) or {}
        allowed = ", ".join(parent.get("properties", {})) or "none"
        what = "argument" if len(loc) == 1 else "property"
        return ArgumentProblem(path, f"unknown {what} (allowed: {allowed})")
    if kind in _TYPE_ERRORS and node:
        return ArgumentProblem(
            path, f"expected {_describe(node)}, got {describe_value(err.get('input'))}"
        )
    message = str(err.get("msg", "is not valid")).removeprefix("Value error, ")
    return ArgumentProblem(path, message)


def _render(loc: tuple[Any, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(arguments)"


def _node_at(schema: Mapping[str, Any], loc: tuple[Any, ...]) -> Mapping[str, Any] | None:
    node: Any = schema
    for part in loc:
        if not isinstance(node, Mapping):
            return None
        if isinstance(part, int):
            node = node.get("items")
        else:
            node = node.get("properties", {}).get(part)
    return node if isinstance(node, Mapping) else None


def _describe(node: Mapping[str, Any], depth: int = 0) -> str:
    """What a schema node expects, in the words ``app.tool.validation`` uses."""
    if "enum" in node:
        return "one of " + ", ".join(json.dumps(v, ensure_ascii=False) for v in node["enum"])
    if "const" in node:
        return f"exactly {json.dumps(node['const'], ensure_ascii=False)}"
    kind = node.get("type")
    items = node.get("items")
    if kind == "array" and isinstance(items, Mapping) and items and depth < 3:
        return f"array of {_describe(items, depth + 1)}"
    if isinstance(kind, list):
        return " or ".join(str(k) for k in kind)
    return str(kind or "a value")
