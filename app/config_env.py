"""``${VAR}`` and ``${VAR:-default}`` in config values, expanded from the environment."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["ExpansionError", "expand_string", "expand_tree"]


_ENV_TOKEN = re.compile(
    r"\$\$\{"  # escaped: $${ -> literal ${
    r"|\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>[^}]*))?\}"
    r"|\$\{"  # anything else starting with ${ is malformed
)


class ExpansionError(Exception):
    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem


def expand_string(value: str, environ: Mapping[str, str]) -> str:
    if "${" not in value:
        return value

    def substitute(match: re.Match[str]) -> str:
        token = match.group(0)
        if token == "$${":
            return "${"
        name = match.group("name")
        if name is None:
            raise ExpansionError(
                "malformed ${...} reference (use ${NAME} or ${NAME:-default}; "
                "write $${ for a literal ${)"
            )
        default = match.group("default")
        current = environ.get(name)
        if default is not None:
            return current if current else default
        if current is None:
            raise ExpansionError(
                f"environment variable {name} is not set (export it, or give a default "
                f"with ${{{name}:-value}})"
            )
        return current

    return _ENV_TOKEN.sub(substitute, value)


def expand_tree(
    value: Any,
    path: tuple[str | int, ...],
    environ: Mapping[str, str],
    on_error: Callable[[tuple[str | int, ...], str], None],
) -> Any:
    """Expand ``${VAR}`` in every string of a parsed document, reporting failures by key."""
    if isinstance(value, str):
        try:
            return expand_string(value, environ)
        except ExpansionError as exc:
            on_error(path, exc.problem)
            return value
    if isinstance(value, dict):
        return {k: expand_tree(v, (*path, k), environ, on_error) for k, v in value.items()}
    if isinstance(value, list):
        return [expand_tree(v, (*path, i), environ, on_error) for i, v in enumerate(value)]
    return value
