"""Upstream compatibility: upstream's Bedrock shim (``api_type = "aws"``), as names only.

Bedrock is not supported yet: the config refuses ``api_type = "aws"`` when it loads, and
building any of these classes raises :class:`~app.exceptions.UnsupportedFeatureError` with
the same advice (reach Bedrock through an OpenAI-compatible gateway).
"""

from __future__ import annotations

from typing import Any

from app.exceptions import BEDROCK_MESSAGE, UnsupportedFeatureError

__all__ = [
    "BEDROCK_MESSAGE",
    "CURRENT_TOOLUSE_ID",
    "BedrockClient",
    "Chat",
    "ChatCompletions",
    "OpenAIResponse",
]

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
