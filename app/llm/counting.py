"""A request's input tokens estimated over our types, for a model that does not count in its
own wire format (``CountsTokens``): the chat accounting of ``app.tokens`` (text, tool calls,
names and ids) plus the images and the thinking blocks a message carries."""

from __future__ import annotations

from collections.abc import Sequence

from app.llm.model import ToolDefinition
from app.schema import Message
from app.tokens import REPLY_PRIMING, TokenCounter


def count_request(
    counter: TokenCounter, messages: Sequence[Message], tools: Sequence[ToolDefinition]
) -> int:
    """Input tokens of ``messages`` and ``tools`` as ``counter`` counts them."""
    total = REPLY_PRIMING
    for message in messages:
        total += counter.count_message(message)  # type: ignore[arg-type]  # read by attribute
        for image in message.images or ():
            total += counter.count_image({"url": image.url, "detail": image.detail})
        for block in message.thinking_blocks or ():
            total += counter.count_text(block.text or block.data or "")
    return total + counter.count_tools([tool.to_param() for tool in tools] if tools else None)
