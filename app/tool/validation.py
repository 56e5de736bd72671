"""Checking a tool call's arguments against a JSON schema that comes from outside (an MCP
server's ``inputSchema``, a hand-written ``parameters``); tools declared in Python use their
pydantic model (``app.tool.declared``). What is checked and the policy (closed objects,
lossless coercion, ``null`` as "not given") are in docs/agents.md, "Arguments are checked
before the tool runs". All problems are reported at once; recursion is bounded by ``MAX_DEPTH``.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from app.exceptions import ArgumentProblem, ToolArgumentsError

#: How deep a (recursive) schema is followed into the data, counting each object, array and
#: schema reference as a level; deeper data is reported as an error.
MAX_DEPTH = 100
#: Problems listed in one error; the rest are counted.
MAX_PROBLEMS = 20
_PREVIEW = 60
_PATH_KEYS = 12
_CACHE_SIZE = 512

_INT_TEXT = re.compile(r"[+-]?\d{1,300}")
_NUMBER_TEXT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
#: Keywords next to ``properties`` that may admit other keys: the object is then left open.
_OPENING = frozenset({"patternProperties", "allOf", "anyOf", "oneOf", "$ref"})
_TYPES = ("string", "integer", "number", "boolean", "null", "object", "array")


#: Python type -> JSON type name; ``bool`` before ``int``, which it subclasses.
_TYPE_NAMES: dict[type, str] = {
    bool: "boolean",
    int: "integer",
    float: "number",
    str: "string",
    type(None): "null",
    dict: "object",
    Mapping: "object",
    list: "array",
    tuple: "array",
}


def _json_type(value: Any) -> str:
    """The JSON type name of a Python value (``bool`` is not a number)."""
    kind = _TYPE_NAMES.get(type(value))
    if kind is None:  # a subclass, or no JSON type
        kind = next((n for t, n in _TYPE_NAMES.items() if isinstance(value, t)), None)
    return kind or type(value).__name__


def describe_value(value: Any) -> str:
    """A short, safe rendering of what the model sent: never recursive, never long."""
    kind = _json_type(value)
    if kind in ("object", "array"):
        size = len(value)
        unit = "key" if kind == "object" else "item"
        return f"an {kind} of {size} {unit}{'s' * (size != 1)}"
    if kind == "null":
        return "null"
    text = _literal(value)
    if len(text) > _PREVIEW:
        text = text[: _PREVIEW - 1] + "…"
    return f"{kind} {text}"


def _literal(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


#: Where a value sits: ``None`` for the arguments themselves, else ``(parent, key)``. Built
#: as a cheap chain while checking and rendered (``steps[0].name``) only for a problem.
_Path = tuple[Any, str | int] | None


def _render(path: _Path) -> str:
    keys: list[str | int] = []
    while path is not None:  # a loop, not recursion: paths can be long
        path, key = path
        keys.append(key)
    keys.reverse()
    if len(keys) > _PATH_KEYS:  # keep both ends of a very deep path
        half = _PATH_KEYS // 2
        return f"{_join(keys[:half])}…{_join(keys[-half:], first=False)}"
    return _join(keys) or "(arguments)"


def _join(keys: list[str | int], first: bool = True) -> str:
    text = ""
    for key in keys:
        if isinstance(key, int):
            text += f"[{key}]"
        else:
            text += f".{key}" if text or not first else key
    return text


class _Problems:
    """Problems found so far; keeps the first ``MAX_PROBLEMS`` and counts the rest."""

    __slots__ = ("count", "items")

    def __init__(self) -> None:
        self.items: list[ArgumentProblem] = []
        self.count = 0

    def add(self, path: _Path, message: str) -> None:
        self.count += 1
        if len(self.items) < MAX_PROBLEMS:
            self.items.append(ArgumentProblem(_render(path), message))


_MISSING = object()


def _sized(
    value: Any,
    size: int,
    low: int | None,
    high: int | None,
    unit: str,
    path: _Path,
    problems: _Problems,
) -> Any:
    """``value``, or ``_MISSING`` after recording that its ``size`` is out of bounds."""
    if low is not None and size < low:
        problems.add(path, f"expected at least {low} {unit}, got {size}")
    elif high is not None and size > high:
        problems.add(path, f"expected at most {high} {unit}, got {size}")
    else:
        return value
    return _MISSING


class _Node:
    """One compiled schema: ``check`` returns the (possibly coerced) value, or ``_MISSING``
    after recording why the value does not fit."""

    __slots__ = (
        "additional", "all_of", "any_of", "bounded", "combined", "const", "enum", "ex_max",
        "ex_min", "items", "max_items", "max_len", "maximum", "min_items", "min_len", "minimum",
        "properties", "ref", "required", "types",
    )  # fmt: skip

    def __init__(self) -> None:
        self.types: tuple[str, ...] | None = None
        self.enum: tuple[Any, ...] | None = None
        self.const: Any = _MISSING
        self.properties: dict[str, _Node] | None = None
        self.required: tuple[str, ...] = ()
        self.additional: bool | _Node = True
        self.items: _Node | None = None
        self.any_of: tuple[_Node, ...] = ()
        self.all_of: tuple[_Node, ...] = ()
        #: A local ``$ref``: compiles its target when first followed (recursive schemas work).
        self.ref: Callable[[], _Node] | None = None
        self.minimum = self.maximum = self.ex_min = self.ex_max = None
        self.min_len = self.max_len = self.min_items = self.max_items = None
        #: Precomputed so that the common case (a plain typed value) skips the rare checks.
        self.combined = self.bounded = False

    def describe(self, depth: int = 0) -> str:
        """What this schema expects, in words the model reads."""
        if depth > 3:
            return "a nested value"
        if self.enum is not None:
            return "one of " + ", ".join(_literal(v) for v in self.enum)
        if self.const is not _MISSING:
            return f"exactly {_literal(self.const)}"
        if self.any_of:
            return " or ".join(dict.fromkeys(n.describe(depth + 1) for n in self.any_of))
        if self.ref is not None:
            return self.ref().describe(depth + 1)
        if self.types is None:
            return "any value"
        items = self.items
        if "array" in self.types and items is not None and items.types is not None:
            array = f"array of {items.describe(depth + 1)}"
            return " or ".join(array if kind == "array" else kind for kind in self.types)
        return " or ".join(self.types)

    def check(self, value: Any, path: _Path, problems: _Problems, depth: int) -> Any:
        if depth > MAX_DEPTH:  # only a schema whose references loop gets here
            return _too_deep(path, problems)
        if self.combined:
            value = self._check_combined(value, path, problems, depth)
            if value is _MISSING:
                return _MISSING
        kind = _TYPE_NAMES.get(type(value)) or _json_type(value)
        types = self.types
        if (
            types is not None
            and kind not in types
            and not (kind == "integer" and "number" in types)
        ):
            coerced = _coerce(value, types)
            if coerced is _MISSING:
                problems.add(path, f"expected {self.describe()}, got {describe_value(value)}")
                return _MISSING
            value, kind = coerced, _json_type(coerced)
        if self.enum is not None and not _among(value, self.enum):
            problems.add(path, f"expected {self.describe()}, got {describe_value(value)}")
            return _MISSING
        if self.const is not _MISSING and not _among(value, (self.const,)):
            problems.add(path, f"expected {_literal(self.const)}, got {describe_value(value)}")
            return _MISSING
        if kind == "string":
            return self._check_length(value, path, problems) if self.bounded else value
        if kind == "object":
            return self._check_object(value, path, problems, depth)
        if kind == "array":
            return self._check_array(value, path, problems, depth)
        if self.bounded and kind in ("integer", "number"):
            return self._check_number(value, path, problems)
        return value

    def _check_combined(self, value: Any, path: _Path, problems: _Problems, depth: int) -> Any:
        """``$ref``, ``anyOf``/``oneOf`` and ``allOf``, in that order."""
        if self.ref is not None:
            value = self.ref().check(value, path, problems, depth + 1)
        if self.any_of and value is not _MISSING:
            value = self._check_any_of(value, path, problems, depth)
        for node in self.all_of:
            if value is _MISSING:
                break
            value = node.check(value, path, problems, depth + 1)
        return value

    def _check_any_of(self, value: Any, path: _Path, problems: _Problems, depth: int) -> Any:
        kind = _json_type(value)  # branches that take the value as it is before coercing ones
        for node in sorted(self.any_of, key=lambda n: n.types is not None and kind not in n.types):
            result = node.check(value, path, _Problems(), depth + 1)
            if result is not _MISSING:
                return result
        problems.add(path, f"expected {self.describe()}, got {describe_value(value)}")
        return _MISSING

    def _check_number(self, value: float, path: _Path, problems: _Problems) -> Any:
        for bound, ok, word in (
            (self.minimum, lambda b: value >= b, "at least"),
            (self.maximum, lambda b: value <= b, "at most"),
            (self.ex_min, lambda b: value > b, "more than"),
            (self.ex_max, lambda b: value < b, "less than"),
        ):
            if bound is not None and not ok(bound):
                problems.add(path, f"expected {word} {_literal(bound)}, got {_literal(value)}")
                return _MISSING
        return value

    def _check_length(self, value: str, path: _Path, problems: _Problems) -> Any:
        return _sized(value, len(value), self.min_len, self.max_len, "characters", path, problems)

    def _check_array(self, value: Any, path: _Path, problems: _Problems, depth: int) -> Any:
        if depth >= MAX_DEPTH and self.items is not None:
            return _too_deep(path, problems)
        if (
            _sized(value, len(value), self.min_items, self.max_items, "items", path, problems)
            is _MISSING
        ):
            return _MISSING
        if self.items is None:
            return value
        out = [
            self.items.check(item, (path, i), problems, depth + 1) for i, item in enumerate(value)
        ]
        if any(checked is _MISSING for checked in out):
            return _MISSING
        return out if any(c is not item for c, item in zip(out, value, strict=True)) else value

    def _check_object(
        self, value: Mapping[str, Any], path: _Path, problems: _Problems, depth: int
    ) -> Any:
        if depth >= MAX_DEPTH and (self.properties or self.additional is not True):
            return _too_deep(path, problems)
        props = self.properties or {}
        before = problems.count
        out: dict[str, Any] = {}
        changed = False
        for key, item in value.items():
            node = props.get(key)
            where = (path, key if isinstance(key, str) else repr(key))
            if node is None:
                if self.additional is False:
                    allowed = ", ".join(props) or "none"
                    what = "argument" if path is None else "property"
                    problems.add(where, f"unknown {what} (allowed: {allowed})")
                    continue
                if self.additional is True:
                    out[key] = item
                    continue
                node = self.additional
            elif item is None and key not in self.required and not node.allows_null():
                changed = True  # null for an optional property: "not given"
                continue
            checked = node.check(item, where, problems, depth + 1)
            if checked is not _MISSING:
                changed = changed or checked is not item
                out[key] = checked
        for key in self.required:
            if key not in value:
                node = props.get(key)
                expected = f"; expected {node.describe()}" if node is not None else ""
                problems.add((path, key), f"missing required argument{expected}")
        if problems.count != before:
            return _MISSING
        return out if changed else value

    def allows_null(self) -> bool:
        if self.types is None and not self.any_of and self.ref is None:
            return self.enum is None or None in self.enum
        if self.types is not None and "null" in self.types:
            return True
        if self.ref is not None:
            return self.ref().allows_null()
        return any(n.allows_null() for n in self.any_of)


def _too_deep(path: _Path, problems: _Problems) -> Any:
    problems.add(
        path, f"nested too deeply to check (more than {MAX_DEPTH} levels); send a flatter value"
    )
    return _MISSING


def _among(value: Any, allowed: tuple[Any, ...]) -> bool:
    kind = _json_type(value)
    return any(value == option and _json_type(option) == kind for option in allowed) or (
        kind in ("integer", "number")
        and any(_json_type(o) in ("integer", "number") and o == value for o in allowed)
    )


def _coerce(value: Any, types: tuple[str, ...]) -> Any:
    """``value`` turned losslessly into one of ``types``, or ``_MISSING``."""
    if isinstance(value, float) and "integer" in types and value.is_integer():
        return int(value)
    if not isinstance(value, str):
        return _MISSING
    text = value.strip()
    for kind in types:
        if kind == "integer" and _INT_TEXT.fullmatch(text):
            return int(text)
        if kind == "number" and _NUMBER_TEXT.fullmatch(text):
            if _INT_TEXT.fullmatch(text):
                return int(text)
            number = float(text)
            if math.isfinite(number):
                return number
        if kind == "boolean" and text.lower() in ("true", "false"):
            return text.lower() == "true"
        if kind in ("array", "object") and text[:1] in "[{":
            try:
                decoded = json.loads(text)
            except (ValueError, RecursionError):
                continue
            if _json_type(decoded) == kind:
                return decoded
    return _MISSING


class _Compiler:
    """Turns one schema document into ``_Node``s; ``$ref`` pointers resolve against it."""

    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root
        self.refs: dict[str, _Node] = {}

    def resolve(self, pointer: str) -> _Node:
        node = self.refs.get(pointer)
        if node is not None:
            return node
        target: Any = self.root
        for part in pointer.lstrip("#").split("/"):
            if not part:
                continue
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(target, Mapping) and part in target:
                target = target[part]
            else:
                target = None
                break
        self.refs[pointer] = node = _Node()  # placeholder first: a ref may point at itself
        compiled = self.compile(target, 0)
        for slot in _Node.__slots__:
            setattr(node, slot, getattr(compiled, slot))
        return node

    def compile(self, schema: Any, depth: int, closed: bool = True) -> _Node:
        """``closed``: an object with ``properties`` and no ``additionalProperties`` takes no
        other keys (off inside ``allOf``, whose branches each list only part of them)."""
        node = _Node()
        if not isinstance(schema, Mapping) or depth > MAX_DEPTH:
            return node  # anything goes: never reject on what we cannot read
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#"):
            node.ref = functools.partial(self.resolve, ref)
        kind = schema.get("type")
        if isinstance(kind, str):
            kind = [kind]
        if isinstance(kind, list):
            known = tuple(k for k in kind if k in _TYPES)
            node.types = known if known and len(known) == len(kind) else None
        enum = schema.get("enum")
        if isinstance(enum, list) and enum:
            node.enum = tuple(enum)
        if "const" in schema:
            node.const = schema["const"]
        for word, slot in (
            ("minimum", "minimum"),
            ("maximum", "maximum"),
            ("exclusiveMinimum", "ex_min"),
            ("exclusiveMaximum", "ex_max"),
        ):
            bound = schema.get(word)
            if isinstance(bound, int | float) and not isinstance(bound, bool):
                setattr(node, slot, bound)
        for word, slot in (
            ("minLength", "min_len"),
            ("maxLength", "max_len"),
            ("minItems", "min_items"),
            ("maxItems", "max_items"),
        ):
            bound = schema.get(word)
            if isinstance(bound, int) and not isinstance(bound, bool) and bound >= 0:
                setattr(node, slot, bound)
        props = schema.get("properties")
        if isinstance(props, Mapping):
            node.properties = {str(k): self.compile(v, depth + 1) for k, v in props.items()}
        required = schema.get("required")
        if isinstance(required, list):
            node.required = tuple(k for k in required if isinstance(k, str))
        extra = schema.get("additionalProperties", _MISSING)
        if extra is False:
            node.additional = False
        elif isinstance(extra, Mapping):
            node.additional = self.compile(extra, depth + 1)
        elif (
            extra is _MISSING
            and isinstance(props, Mapping)
            and closed
            and not _OPENING.intersection(schema)
        ):
            node.additional = False  # closed by default: an unknown argument is a mistake
        items = schema.get("items")
        if isinstance(items, Mapping):
            node.items = self.compile(items, depth + 1)
        for word in ("anyOf", "oneOf"):
            branches = schema.get(word)
            if isinstance(branches, list) and branches:
                node.any_of = tuple(self.compile(b, depth + 1) for b in branches)
                break
        all_of = schema.get("allOf")
        if isinstance(all_of, list):
            node.all_of = tuple(self.compile(b, depth + 1, closed=False) for b in all_of)
        node.combined = bool(node.ref is not None or node.any_of or node.all_of)
        node.bounded = any(
            getattr(node, slot) is not None
            for slot in ("minimum", "maximum", "ex_min", "ex_max", "min_len", "max_len")
        )
        return node


class ArgumentsValidator:
    """One tool's compiled schema: ``validate`` returns the arguments to call it with."""

    __slots__ = ("_node",)

    def __init__(self, schema: Mapping[str, Any] | None) -> None:
        self._node = _Compiler(schema or {}).compile(schema or {}, 0)

    def validate(self, tool: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments, coerced where lossless; raises ``ToolArgumentsError`` listing every
        problem."""
        problems = _Problems()
        checked: Any = arguments
        if isinstance(arguments, Mapping):
            checked = self._node.check(arguments, None, problems, 0)
        if not problems.count and not isinstance(checked, Mapping):
            problems.add(None, f"expected an object, got {describe_value(checked)}")
        if problems.count:
            raise ToolArgumentsError(tool, tuple(problems.items), problems.count)
        return dict(checked)


_cache: dict[str, ArgumentsValidator] = {}
_by_identity: dict[int, tuple[Any, ArgumentsValidator]] = {}


def validator_for(schema: Mapping[str, Any] | None) -> ArgumentsValidator:
    """The validator of this schema object: a dict lookup on the hot path. A schema edited in
    place is not noticed (assign a new dict to ``parameters`` instead)."""
    entry = _by_identity.get(id(schema))
    if entry is not None and entry[0] is schema:
        return entry[1]
    validator = compile_arguments_schema(schema)
    if len(_by_identity) >= _CACHE_SIZE:
        _by_identity.pop(next(iter(_by_identity)))
    _by_identity[id(schema)] = (schema, validator)  # holding the schema keeps its id unique
    return validator


def compile_arguments_schema(schema: Mapping[str, Any] | None) -> ArgumentsValidator:
    """The validator of ``schema``, compiled once per distinct schema content (many tool
    instances with equal schemas share one)."""
    try:
        key = json.dumps(schema, sort_keys=True, default=str)
    except (TypeError, ValueError, RecursionError):
        return ArgumentsValidator(schema)
    validator = _cache.get(key)
    if validator is None:
        if len(_cache) >= _CACHE_SIZE:
            _cache.pop(next(iter(_cache)))
        validator = _cache[key] = ArgumentsValidator(schema)
    return validator
