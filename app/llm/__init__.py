"""The language-model layer: the :class:`Model` seam, the wire models under it
(``app.llm.openai``, ``app.llm.bedrock``, ``app.llm.anthropic``: only ``app.llm.stack`` picks
them), the wrappers every model gets, and upstream's ``LLM`` facade. Importing this package
imports no provider SDK."""

from app.llm.client import LLM, model_argument
from app.llm.compat import MULTIMODAL_MODELS, REASONING_MODELS
from app.llm.model import Model, ModelParams, ModelResponse, ToolDefinition
from app.llm.usage import Usage
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
