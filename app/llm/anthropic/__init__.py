"""Anthropic's Messages API as a :class:`~app.llm.model.Model` (``api_type = "anthropic"``;
docs/anthropic.md). Importing this package does not import the anthropic SDK: the model does,
on its first request."""

from app.llm.anthropic.model import AnthropicModel

__all__ = ["AnthropicModel"]
