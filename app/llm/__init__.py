"""The language-model layer: the :class:`Model` seam, the wire models under it
(``app.llm.openai``, ``app.llm.bedrock``, ``app.llm.anthropic``: only ``app.llm.stack`` picks
them), the wrappers every model gets, and upstream's ``LLM`` facade. Importing this package
imports no provider SDK."""

from typing import TYPE_CHECKING

from app.llm.client import LLM, model_argument
from app.llm.model import Model, ModelParams, ModelResponse, ToolDefinition
from app.llm.usage import Usage
from app.tokens import TokenCounter

if TYPE_CHECKING:
    from app.compat.llm import MULTIMODAL_MODELS, REASONING_MODELS

__all__ = [
    "LLM",
    "MULTIMODAL_MODELS",
    "REASONING_MODELS",
    "Model",
    "ModelParams",
    "ModelResponse",
    "TokenCounter",
    "ToolDefinition",
    "Usage",
    "model_argument",
]


def __getattr__(name: str) -> object:
    """Upstream's model-name lists, from the compatibility layer on first use (importing it
    here at once would make ``import app.compat.llm`` circular)."""
    if name in ("MULTIMODAL_MODELS", "REASONING_MODELS"):
        from app.compat import llm

        return getattr(llm, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
