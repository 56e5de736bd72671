"""The language-model wrapper. Importing this package does not import the openai SDK."""

from app.llm.client import LLM
from app.llm.usage import Usage

__all__ = ["LLM", "Usage"]
