"""What a model can do, guessed from its name when the config does not say.

The config flags ``reasoning_model`` and ``supports_images`` always win; these prefixes are only
defaults, so a new model never needs a code change, only a config line.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.config import LLMSettings

_REASONING_PREFIXES = ("o1", "o3", "o4", "gpt-5")
_IMAGE_PREFIXES = (
    "gpt-4o",
    "gpt-4.1",
    "gpt-4-turbo",
    "gpt-4-vision",
    "gpt-5",
    "o1",
    "o3",
    "o4",
    "chatgpt-4o",
    "claude-3",
    "claude-sonnet",
    "claude-opus",
    "claude-haiku",
    "gemini",
    "llava",
    "bakllava",
    "pixtral",
    "qwen-vl",
    "qwen2-vl",
    "qwen2.5-vl",
    "qwen3-vl",
    "llama3.2-vision",
    "llama-3.2-vision",
    "llama-4",
    "gemma3",
    "minicpm-v",
    "glm-4v",
)
_IMAGE_MARKERS = ("-vl", "vision", "-omni")


#: A Bedrock model id's cross-region prefix and vendor: ``us.anthropic.claude-3-7-sonnet-...``
#: (compiled on first use, by ``re``'s cache: not at start-up).
_BEDROCK_ID = (
    r"^(?:(?:us|eu|apac|global|us-gov|ca|jp|au)\.)?"
    r"(?:anthropic|amazon|meta|mistral|cohere|ai21|deepseek|qwen|writer|openai|twelvelabs)\."
)


def base_model_name(model: str) -> str:
    """``"openai/gpt-4o-mini"`` -> ``"gpt-4o-mini"``, ``"us.anthropic.claude-3-7-sonnet-..."``
    -> ``"claude-3-7-sonnet-..."``: provider prefixes do not change abilities."""
    name = model.rsplit("/", 1)[-1].strip().lower()
    return re.sub(_BEDROCK_ID, "", name, count=1) if "." in name else name


def default_reasoning_model(model: str) -> bool:
    """Reasoning models take ``max_completion_tokens`` and reject ``temperature``."""
    name = base_model_name(model)
    if name.startswith("gpt-5") and "chat" in name:
        return False
    return name.startswith(_REASONING_PREFIXES)


def default_supports_images(model: str) -> bool:
    name = base_model_name(model)
    if name in ("o1-mini", "o3-mini"):
        return False
    return name.startswith(_IMAGE_PREFIXES) or any(m in name for m in _IMAGE_MARKERS)


def model_flags(settings: LLMSettings) -> tuple[bool, bool]:
    """Whether the profile's model reasons and accepts images: its flags, else the defaults."""
    reasoning, images = settings.reasoning_model, settings.supports_images
    return (
        default_reasoning_model(settings.model) if reasoning is None else reasoning,
        default_supports_images(settings.model) if images is None else images,
    )
