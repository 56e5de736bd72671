"""Outside text made valid UTF-8 where it enters: a lone surrogate (JSON's ``\\ud800``) has no
encoding, so printing or writing it would fail far from where it came in."""

from __future__ import annotations

from typing import Any

REPLACEMENT = "\ufffd"


def is_clean(text: str) -> bool:
    """Whether ``text`` has a UTF-8 encoding (holds no lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def clean_text(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (pairs joined); the same object
    when there is nothing to replace."""
    if is_clean(text):
        return text
    # UTF-16 holds surrogates as they are: decoding joins the pairs and replaces the rest.
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def clean_tree(value: Any) -> Any:
    """Decoded JSON with every string (keys too) cleaned in place; returns the value. Walks
    without recursion, so nesting as deep as the parser allowed is fine."""
    if isinstance(value, str):
        return clean_text(value)
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            for index, child in enumerate(item):
                if isinstance(child, str):
                    item[index] = clean_text(child)
                elif isinstance(child, dict | list):
                    stack.append(child)
        elif isinstance(item, dict):
            for key, child in list(item.items()):
                if isinstance(child, str):
                    cleaned = clean_text(child)
                    if cleaned is not child:
                        item[key] = child = cleaned
                elif isinstance(child, dict | list):
                    stack.append(child)
                if isinstance(key, str) and not is_clean(key):
                    del item[key]
                    item[clean_text(key)] = child
    return value
