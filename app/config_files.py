"""Reading a config file within bounds: a size limit before parsing, a nesting limit after,
and every failure a ``ConfigError`` that names the file (never a ``RecursionError``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from app.exceptions import ConfigError

__all__ = [
    "MAX_CONFIG_BYTES",
    "MAX_CONFIG_DEPTH",
    "nested_error",
    "parse_toml",
    "read_limited",
    "too_deep",
]

#: Config files above this size are refused before parsing (bounded time and memory).
MAX_CONFIG_BYTES = 4 * 1024 * 1024
#: Tables and arrays nested deeper than this are refused (nothing valid comes close).
MAX_CONFIG_DEPTH = 32


def read_limited(path: Path) -> bytes:
    """The file's bytes, refused with a clear error above :data:`MAX_CONFIG_BYTES`."""
    with path.open("rb") as fh:
        data = fh.read(MAX_CONFIG_BYTES + 1)
        size = max(len(data), os.fstat(fh.fileno()).st_size)
    if size > MAX_CONFIG_BYTES:
        raise ConfigError(
            f"{path}: config file too large ({size / 1e6:.0f} MB, limit "
            f"{MAX_CONFIG_BYTES // (1024 * 1024)} MB)"
        )
    return data


def too_deep(value: Any) -> bool:
    """Whether tables/arrays nest deeper than :data:`MAX_CONFIG_DEPTH` (without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_CONFIG_DEPTH:
            return True
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return False


def nested_error(path: Path) -> ConfigError:
    return ConfigError(
        f"{path}: {path.name} is nested too deeply (more than {MAX_CONFIG_DEPTH} levels of "
        "tables or arrays)"
    )


def parse_toml(path: Path) -> dict[str, Any]:
    """The TOML document in ``path``, read within the size and nesting limits."""
    import tomllib  # only when a file is read (a run configured in code never needs it)

    try:
        data = read_limited(path)
    except OSError as exc:
        raise ConfigError(f"Cannot read configuration file {path}: {exc}") from exc
    try:
        document = tomllib.loads(data.decode("utf-8"))
    except RecursionError:
        raise nested_error(path) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"Configuration file {path} is not valid UTF-8 text (byte {exc.start})"
        ) from exc
    except tomllib.TOMLDecodeError as exc:
        # tomllib's message carries "(at line L, column C)".
        raise ConfigError(f"Invalid TOML in {path}: {exc}") from exc
    if too_deep(document):
        raise nested_error(path)
    return document
