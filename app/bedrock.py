"""Upstream's Bedrock shim (``api_type = "aws"``), kept as importable names only.

Bedrock is not supported yet: the config refuses ``api_type = "aws"`` when it loads, and
building any of these classes raises :class:`~app.exceptions.UnsupportedFeatureError` with
the same advice (reach Bedrock through an OpenAI-compatible gateway).
"""

from __future__ import annotations

from typing import Any

from app.exceptions import UnsupportedFeatureError

__all__ = [
    "BEDROCK_MESSAGE",
    "CURRENT_TOOLUSE_ID",
    "BedrockClient",
    "Chat",
    "ChatCompletions",
    "OpenAIResponse",
]

BEDROCK_MESSAGE = (
    "api_type 'aws' (Bedrock) is not supported yet: reach Bedrock through an OpenAI-compatible "
    'gateway (LiteLLM, bedrock-access-gateway) and set api_type = "openai" with that '
    "gateway's base_url, or use another provider"
)

#: Upstream's module-level tool-use id (unused here).
CURRENT_TOOLUSE_ID: str | None = None


class _Refused:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise UnsupportedFeatureError(f"{type(self).__name__}: {BEDROCK_MESSAGE}")


class OpenAIResponse(_Refused):
    """Upstream's Bedrock reply shaped like an OpenAI response (not supported)."""


class BedrockClient(_Refused):
    """Upstream's Bedrock client (not supported)."""


class Chat(_Refused):
    """Upstream's ``client.chat`` (not supported)."""


class ChatCompletions(_Refused):
    """Upstream's ``client.chat.completions`` (not supported)."""
