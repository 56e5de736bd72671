"""Config problems reported the way the user wrote the file: keys named as in TOML/JSON,
values echoed except for secrets, unknown keys with a close-match suggestion."""

from __future__ import annotations

import json
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

__all__ = [
    "SECRET_FIELDS",
    "describe_error",
    "describe_errors",
    "json_key",
    "model_field_types",
    "short_repr",
    "suggest",
    "toml_key",
    "unknown_keys",
]

#: Keys whose values are never echoed in error messages.
SECRET_FIELDS = frozenset({"api_key", "password", "headers", "env"})
_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def quote_key(key: str) -> str:
    return key if _BARE_KEY.match(key) else json.dumps(key)


def key_suffix(parts: Sequence[str | int]) -> str:
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += ("." if text else "") + quote_key(part)
    return text


def toml_key(raw: Mapping[str, Any], path: Sequence[str | int]) -> str:
    """``("llm", "vision", "max_tokens")`` -> ``[llm.vision] max_tokens`` (tables as headers)."""
    header: list[str] = []
    node: Any = raw
    index = 0
    while (
        index < len(path)
        and isinstance(node, Mapping)
        and isinstance(path[index], str)
        and isinstance(node.get(path[index]), Mapping)
    ):
        header.append(quote_key(str(path[index])))
        node = node[path[index]]
        index += 1
    rest = key_suffix(path[index:])
    if not header:
        return rest
    head = "[" + ".".join(header) + "]"
    return f"{head} {rest}" if rest else head


def json_key(path: Sequence[str | int]) -> str:
    return key_suffix(path)


def short_repr(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe_error(
    error: Mapping[str, Any],
    path: tuple[str | int, ...],
    name_key: Callable[[tuple[str | int, ...]], str],
) -> str:
    """One pydantic error as ``<key as written>: <problem> (got <value>)``."""
    where = name_key(path) or "(top level)"
    kind = error.get("type", "")
    if kind == "missing":
        return f"{where}: required but missing"
    ctx = error.get("ctx") or {}
    if kind == "value_error" and "error" in ctx:
        problem = str(ctx["error"])
    else:
        problem = str(error.get("msg", "invalid value"))
    # Never echo values of secret-bearing keys; whole-model inputs are not worth echoing.
    secret = any(isinstance(p, str) and p in SECRET_FIELDS for p in path)
    if error.get("loc") and not secret and "input" in error:
        shown = short_repr(error["input"])
        if shown not in problem and repr(error["input"]) not in problem:  # said once
            problem += f" (got {shown})"
    return f"{where}: {problem}"


def describe_errors(
    exc: ValidationError,
    prefix: tuple[str | int, ...],
    name_key: Callable[[tuple[str | int, ...]], str],
) -> list[str]:
    return [
        describe_error(error, (*prefix, *error.get("loc", ())), name_key)
        for error in exc.errors(include_url=False)
    ]


def model_field_types(model: type[BaseModel]) -> dict[str, type[BaseModel] | None]:
    """Field name -> nested model class (for sub-tables), else None."""
    result: dict[str, type[BaseModel] | None] = {}
    for name, field in model.model_fields.items():
        nested: type[BaseModel] | None = None
        annotation = field.annotation
        candidates = (
            typing.get_args(annotation)
            if isinstance(annotation, types.UnionType)
            or typing.get_origin(annotation) is typing.Union
            else (annotation,)
        )
        for candidate in candidates:
            if isinstance(candidate, type) and issubclass(candidate, BaseModel):
                nested = candidate
        result[name] = nested
    return result


def suggest(key: str, known: Any) -> str:
    import difflib  # only for a misspelt key

    match = difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
    return f" (did you mean {match[0]!r}?)" if match else ""


def unknown_keys(
    model: type[BaseModel],
    data: Mapping[str, Any],
    path: tuple[str | int, ...],
    skip: frozenset[str] = frozenset(),
) -> list[tuple[tuple[str | int, ...], str]]:
    """(path, suggestion) for every key the model does not know, recursing into sub-tables."""
    fields = model_field_types(model)
    found: list[tuple[tuple[str | int, ...], str]] = []
    for key, value in data.items():
        if key in skip:
            continue
        if key not in fields:
            found.append(((*path, key), suggest(key, fields)))
            continue
        nested = fields[key]
        if nested is not None and isinstance(value, Mapping):
            found.extend(unknown_keys(nested, value, (*path, key)))
    return found
