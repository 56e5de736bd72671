"""Config problems reported as the user wrote the file (keys as in TOML/JSON, no secrets
echoed, "did you mean" for unknown keys), all of one file in one ``ConfigError``."""

from __future__ import annotations

import json
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from app.exceptions import ConfigError
from app.logger import logger

#: Keys whose values are never echoed in error messages.
SECRET_FIELDS = frozenset({"api_key", "password", "headers", "env"})
#: How to turn unknown-key errors into warnings (shown under them).
STRICT_HINT = (
    "Unknown keys are errors. To only warn about them (say, a config shared with another "
    "version), put strict = false at the top of config.toml, before any [table]."
)
_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")

KeyPath = tuple[str | int, ...]


def _quote_key(key: str) -> str:
    return key if _BARE_KEY.match(key) else json.dumps(key)


def json_key(path: Sequence[str | int]) -> str:
    """``("mcpServers", "x", "args", 0)`` -> ``mcpServers.x.args[0]``."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += ("." if text else "") + _quote_key(part)
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
        header.append(_quote_key(str(path[index])))
        node = node[path[index]]
        index += 1
    rest = json_key(path[index:])
    if not header:
        return rest
    head = "[" + ".".join(header) + "]"
    return f"{head} {rest}" if rest else head


def short_repr(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe_error(
    error: Mapping[str, Any], path: KeyPath, name_key: Callable[[KeyPath], str]
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


def _nested_model(annotation: Any) -> type[BaseModel] | None:
    """The model class a field holds (alone or in a union), for checking its sub-table."""
    union = isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union
    for candidate in typing.get_args(annotation) if union else (annotation,):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def suggest(key: str, known: Any) -> str:
    import difflib  # only for a misspelt key (its import costs 1.2 ms)

    match = difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
    return f" (did you mean {match[0]!r}?)" if match else ""


def unknown_keys(
    model: type[BaseModel], data: Mapping[str, Any], path: KeyPath
) -> list[tuple[KeyPath, str]]:
    """(path, suggestion) for every key the model does not know, recursing into sub-tables."""
    fields = model.model_fields
    found: list[tuple[KeyPath, str]] = []
    for key, value in data.items():
        if key not in fields:
            found.append(((*path, key), suggest(key, fields)))
            continue
        nested = _nested_model(fields[key].annotation)
        if nested is not None and isinstance(value, Mapping):
            found.extend(unknown_keys(nested, value, (*path, key)))
    return found


class Problems:
    """Errors and unknown keys of one file, reported together; unknown keys are errors when
    ``strict`` (else a misspelt ``base_ulr`` is dropped and the default used), else warnings."""

    def __init__(self, path: Path, *, strict: bool = True) -> None:
        self.path = path
        self.strict = strict
        self.errors: list[str] = []
        #: (the key as written, a hint such as " (did you mean 'base_url'?)")
        self.unknown: list[tuple[str, str]] = []

    def error(self, line: str) -> None:
        if line not in self.errors:
            self.errors.append(line)

    def unknown_key(self, key: str, hint: str = "") -> None:
        if (key, hint) not in self.unknown:
            self.unknown.append((key, hint))

    def validate(
        self,
        model: type[BaseModel],
        data: Mapping[str, Any],
        prefix: KeyPath,
        name_key: Callable[[KeyPath], str],
    ) -> Any:
        """``model`` from ``data``, its unknown keys noted; None (errors noted) if invalid."""
        for key_path, hint in unknown_keys(model, data, prefix):
            self.unknown_key(name_key(key_path), hint)
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            for error in exc.errors(include_url=False):
                self.error(describe_error(error, (*prefix, *error.get("loc", ())), name_key))
            return None

    def check(self) -> None:
        """Raise every problem noted so far as one error (unknown keys too when strict, else
        warned about once)."""
        if self.unknown and self.strict:
            for key, hint in self.unknown:
                self.error(f"{key}: unknown key{hint}")
        elif self.unknown:
            listed = "; ".join(key + hint for key, hint in self.unknown)
            logger.warning("Ignoring unknown keys in {}: {}", self.path, listed)
        if self.errors:
            items = "\n".join(f"  - {line}" for line in self.errors)
            hint = f"\n{STRICT_HINT}" if self.strict and self.unknown else ""
            raise ConfigError(f"Invalid configuration in {self.path}:\n{items}{hint}")
