"""The language-model layer: the :class:`Model` seam, its OpenAI-compatible implementation
(``app.llm.openai``), the wrappers a stack is built from, and upstream's ``LLM`` facade.
Importing this package does not import the openai SDK."""

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
