"""Context windows: known ones by model name, and the ones servers tell us when we overflow.

A server that rejects an oversized request usually names its window ("maximum context length
is 8192 tokens", llama.cpp's "Requested tokens (2100) exceed context window of 2048"); the
numbers are read here so the caller can shrink the conversation to fit and try again.
"""

from __future__ import annotations

import re
from typing import Any

#: Context windows (input tokens) of common models, by name prefix; longest prefix wins.
KNOWN_WINDOWS: dict[str, int] = {
    "gpt-4o": 128_000,
    "gpt-4.1": 1_000_000,
    "gpt-4-turbo": 128_000,
    "gpt-4": 8_192,
    "gpt-3.5-turbo": 16_385,
    "gpt-5": 272_000,
    "o1": 200_000,
    "o3": 200_000,
    "o4-mini": 200_000,
    "claude": 200_000,
    "gemini-1.5": 1_000_000,
    "gemini-2": 1_000_000,
    "deepseek": 64_000,
    "qwen": 32_768,
    "llama3": 8_192,
    "llama-3.1": 128_000,
    "llama3.1": 128_000,
}

# Matched case-insensitively with ``re.search`` (compiled on first use, cached by ``re``).
_LIMIT_PATTERNS = (
    r"context (?:window|length|size)(?: of| is)?\s*(?:of\s*)?\(?(\d[\d,]*)",
    r"maximum context length (?:is|of)\s*(\d[\d,]*)",
    r"(\d[\d,]*)\s*(?:tokens?\s*)?maximum",
    r"n_ctx\D{0,5}(\d+)",
    r"max(?:imum)?[_ ]input[_ ]tokens\D{0,5}(\d+)",
)
_TOKENS_PATTERNS = (
    r"requested tokens\s*\((\d[\d,]*)\)",
    r"resulted in (\d[\d,]*) tokens",
    r"you requested (\d[\d,]*) tokens",
    r"prompt is too long:\s*(\d[\d,]*)",
    r"n_prompt_tokens\D{0,5}(\d+)",
    r"(\d[\d,]*) (?:input )?tokens? (?:exceed|is more than|>)",
)


def known_window(model: str) -> int | None:
    """The context window of ``model`` from :data:`KNOWN_WINDOWS`, if it is listed."""
    name = model.lower().rsplit("/", 1)[-1]
    best = None
    for prefix, window in KNOWN_WINDOWS.items():
        if name.startswith(prefix) and (best is None or len(prefix) > best[0]):
            best = (len(prefix), window)
    return best[1] if best else None


def _first_number(patterns: tuple[str, ...], text: str) -> int | None:
    for pattern in patterns:
        match = re.search(pattern, text, re.IGNORECASE)
        if match:
            try:
                value = int(match.group(1).replace(",", ""))
            except ValueError:
                continue
            if value > 0:
                return value
    return None


def context_numbers(text: str, body: Any = None) -> tuple[int | None, int | None]:
    """``(window, requested_tokens)`` named by an overflow error, each None when not stated.

    llama.cpp's own error body carries them as fields (``n_ctx``, ``n_prompt_tokens``).
    """
    limit = tokens = None
    if isinstance(body, dict):
        error = body.get("error")
        inner = error if isinstance(error, dict) else body
        limit = _positive(inner.get("n_ctx"))
        tokens = _positive(inner.get("n_prompt_tokens"))
    limit = limit or _first_number(_LIMIT_PATTERNS, text)
    tokens = tokens or _first_number(_TOKENS_PATTERNS, text)
    if limit is not None and tokens is not None and tokens <= limit and tokens < 64:
        tokens = None  # a stray small number, not a request size
    return limit, tokens


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
