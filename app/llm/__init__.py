"""The language-model wrapper. Importing this package does not import the openai SDK."""

from typing import TYPE_CHECKING

from app._lazy import lazy_getattr
from app.llm.client import LLM, model_argument
from app.llm.model import Model, ModelParams, ModelResponse, ToolDefinition
from app.llm.usage import Usage

if TYPE_CHECKING:
    from app.llm.compat import MULTIMODAL_MODELS, REASONING_MODELS
    from app.tokens import TokenCounter

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

# Upstream's other names in ``app.llm``, loaded on first use.
__getattr__ = lazy_getattr(
    __name__,
    {
        "MULTIMODAL_MODELS": "app.llm.compat",
        "REASONING_MODELS": "app.llm.compat",
        "TokenCounter": "app.tokens",
    },
)
