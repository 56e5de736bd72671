"""Whether an answer matches the expected one, GAIA-style: normalised exact match.

Numbers compare as numbers (``"1,000"``, ``"$1000"`` and ``"1000.0"`` are equal), comma- or
semicolon-separated lists compare element by element, and other text ignores case,
whitespace and punctuation. ``contains`` mode accepts an answer that includes the expected
text (after the same normalisation), for agents that answer in a sentence.
"""

from __future__ import annotations

import re
import string

_NUMBER_NOISE = re.compile(r"[\s,$%€£]")
_LIST_SPLIT = re.compile(r"[,;]")
_DROP = str.maketrans("", "", string.punctuation + string.whitespace)


def normalize_text(value: str) -> str:
    return value.lower().translate(_DROP)


def _number(value: str) -> float | None:
    text = _NUMBER_NOISE.sub("", value)
    try:
        return float(text)
    except ValueError:
        return None


def _same(answer: str, expected: str) -> bool:
    wanted = _number(expected)
    if wanted is not None:
        got = _number(answer)
        return got is not None and abs(got - wanted) <= 1e-9 * max(1.0, abs(wanted))
    return normalize_text(answer) == normalize_text(expected)


def answers_match(answer: str | None, expected: str, mode: str = "exact") -> bool:
    """True when ``answer`` counts as ``expected`` (see the module docstring)."""
    if answer is None:
        return False
    answer = answer.strip()
    if mode == "contains":
        return normalize_text(expected) in normalize_text(answer)
    if _number(expected) is None and _LIST_SPLIT.search(expected):
        wanted = [part.strip() for part in _LIST_SPLIT.split(expected)]
        got = [part.strip() for part in _LIST_SPLIT.split(answer)]
        return len(wanted) == len(got) and all(map(_same, got, wanted))
    return _same(answer, expected)
