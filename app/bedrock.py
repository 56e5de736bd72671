"""Upstream compatibility: re-exports upstream's ``app.bedrock`` from :mod:`app.compat.bedrock`."""

from app.compat.bedrock import (
    CURRENT_TOOLUSE_ID,
    BedrockClient,
    Chat,
    ChatCompletions,
    OpenAIResponse,
)

__all__ = ["CURRENT_TOOLUSE_ID", "BedrockClient", "Chat", "ChatCompletions", "OpenAIResponse"]
