"""Docker-style size strings (``"512m"``, ``"1g"``) as bytes, shared by every backend."""

from __future__ import annotations

import re

_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)


def parse_size(value: str | int | float) -> int:
    """Bytes in ``value``; raises ValueError with the accepted forms when it makes no sense."""
    if isinstance(value, bool):
        raise ValueError(f"not a size: {value!r}")
    if isinstance(value, int | float):
        number, unit = float(value), ""
    else:
        match = _SIZE.match(str(value))
        if match is None:
            raise ValueError(
                f"not a size: {value!r} (use a number of bytes or a number with a unit, "
                'e.g. "512m", "2g", "100k")'
            )
        number, unit = float(match.group(1)), match.group(2).lower()
    size = int(number * _UNITS[unit])
    if size <= 0:
        raise ValueError(f"a size must be positive, got {value!r}")
    return size


def format_size(size: int) -> str:
    """``536870912`` -> ``512 MiB``: for messages the model reads."""
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if size >= scale:
            return f"{size / scale:g} {unit}"
    return f"{size} bytes"
