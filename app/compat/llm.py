"""Upstream compatibility: upstream's model-name lists (``from app.llm import
REASONING_MODELS``) for code that asks ``model in REASONING_MODELS``.

Upstream kept fixed lists of exact names; here capabilities are decided by the model-name
rules of :mod:`app.llm.capabilities` (and the config's ``reasoning_model`` /
``supports_images`` flags, which these sets cannot see), so membership follows those rules.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from app.llm.capabilities import default_reasoning_model, default_supports_images

__all__ = ["MULTIMODAL_MODELS", "REASONING_MODELS"]


class ModelFamily:
    """A read-only "set" of model names defined by a rule; iterating gives examples."""

    def __init__(self, rule: Callable[[str], bool], examples: tuple[str, ...]) -> None:
        self._rule = rule
        self._examples = examples

    def __contains__(self, model: Any) -> bool:
        return isinstance(model, str) and self._rule(model)

    def __iter__(self) -> Iterator[str]:
        return iter(self._examples)

    def __len__(self) -> int:
        return len(self._examples)

    def __repr__(self) -> str:
        return f"ModelFamily({', '.join(self._examples)}, ...)"


REASONING_MODELS = ModelFamily(default_reasoning_model, ("o1", "o3-mini", "o4-mini", "gpt-5"))
MULTIMODAL_MODELS = ModelFamily(
    default_supports_images,
    ("gpt-4o", "gpt-4o-mini", "gpt-4.1", "claude-3-5-sonnet", "gemini-2.0-flash", "qwen2.5-vl"),
)
