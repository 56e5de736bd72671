"""Upstream compatibility: upstream's Bedrock client (``app.bedrock``), an OpenAI-shaped
``chat.completions.create`` over :class:`app.llm.bedrock.BedrockModel`.

``await BedrockClient().chat.completions.create(model=..., messages=[...], tools=[...])``
takes chat-completions messages and tools and returns an :class:`OpenAIResponse` (attributes
like the openai SDK's objects: ``response.choices[0].message.tool_calls``). Region, endpoint
and credentials come from the AWS chain as for an ``api_type = "aws"`` profile (docs/bedrock.md);
transient errors are retried, and errors are this project's ``LLMError`` types, not
botocore's. ``stream=True`` reads the answer as a stream (nothing is printed, unlike upstream).
"""

from __future__ import annotations

import time
import uuid
from datetime import datetime
from typing import Any

from app.config import LLMSettings
from app.llm.bedrock import BedrockModel
from app.llm.model import Model, ModelParams, ToolDefinition
from app.llm.retry import Retrying
from app.schema import ImagePart, Message

__all__ = [
    "CURRENT_TOOLUSE_ID",
    "BedrockClient",
    "Chat",
    "ChatCompletions",
    "OpenAIResponse",
]

#: Upstream's module-level tool-use id (unused: each call's id travels with its message).
CURRENT_TOOLUSE_ID: str | None = None


class OpenAIResponse:
    """A response dict as attributes, nested dicts too (``choices[0].message.content``)."""

    def __init__(self, data: dict[str, Any]) -> None:
        for key, value in data.items():
            setattr(self, key, _wrapped(value))

    def model_dump(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The response as plain dicts, with upstream's ``created_at`` stamp."""
        data = {key: _plain(value) for key, value in vars(self).items()}
        data["created_at"] = datetime.now().isoformat()
        return data


def _wrapped(value: Any) -> Any:
    if isinstance(value, dict):
        return OpenAIResponse(value)
    if isinstance(value, list):
        return [_wrapped(item) for item in value]
    return value


def _plain(value: Any) -> Any:
    if isinstance(value, OpenAIResponse):
        return {key: _plain(item) for key, item in vars(value).items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


class BedrockClient:
    """Upstream's client: ``client.chat.completions.create(...)``. ``region``, ``profile``
    and ``endpoint_url`` are optional (the AWS chain and ``AWS_ENDPOINT_URL_BEDROCK_RUNTIME``
    otherwise); ``settings`` passes further profile settings (retries, timeout)."""

    def __init__(
        self,
        *,
        region: str | None = None,
        profile: str | None = None,
        endpoint_url: str | None = None,
        **settings: Any,
    ) -> None:
        self._settings = {
            "api_type": "aws",
            "base_url": endpoint_url,
            "aws_region": region,
            "aws_profile": profile,
            **settings,
        }
        self._models: dict[str, Model] = {}
        self.chat = Chat(self)

    def model(self, model_id: str) -> Model:
        """The model for ``model_id`` (built once; transient errors retried)."""
        if model_id not in self._models:
            settings = LLMSettings(model=model_id, **self._settings)
            self._models[model_id] = Retrying(BedrockModel.from_settings(settings), settings)
        return self._models[model_id]


class Chat:
    """Upstream's ``client.chat``."""

    def __init__(self, client: BedrockClient) -> None:
        self.completions = ChatCompletions(client)


class ChatCompletions:
    """Upstream's ``client.chat.completions``."""

    def __init__(self, client: BedrockClient) -> None:
        self.client = client

    async def create(
        self,
        model: str,
        messages: list[dict[str, Any]],
        max_tokens: int | None = None,
        temperature: float | None = None,
        stream: bool | None = True,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str | dict[str, Any] = "auto",
        **kwargs: Any,
    ) -> OpenAIResponse:
        """One chat completion, shaped as the openai SDK's (``finish_reason`` in its terms)."""
        params = ModelParams(
            tools=tuple(ToolDefinition.from_param(tool) for tool in tools or ()),
            tool_choice=tool_choice,
            max_tokens=max_tokens,
            temperature=temperature,
            stream=bool(stream),
            extra=kwargs,
        )
        typed = [_message(item) for item in messages]
        response = await self.client.model(model).request(typed, params)
        reply = response.message
        calls = [call.model_dump() for call in reply.tool_calls or ()]
        usage = response.usage
        return OpenAIResponse(
            {
                "id": f"chatcmpl-{uuid.uuid4()}",
                "created": int(time.time()),
                "object": "chat.completion",
                "model": model,
                "system_fingerprint": None,
                "choices": [
                    {
                        "finish_reason": response.finish_reason,
                        "index": 0,
                        "message": {
                            "content": reply.content,
                            "role": "assistant",
                            "tool_calls": calls or None,
                            "function_call": None,
                        },
                    }
                ],
                "usage": {
                    "completion_tokens": usage.completion_tokens,
                    "prompt_tokens": usage.prompt_tokens,
                    "total_tokens": usage.total_tokens,
                },
            }
        )


def _message(item: dict[str, Any] | Message) -> Message:
    """A chat-completions message as ours (content parts: text joined, images kept)."""
    if isinstance(item, Message):
        return item
    data = dict(item)
    content = data.get("content")
    if isinstance(content, list):
        texts, images = [], []
        for part in content:
            if not isinstance(part, dict):
                continue
            if part.get("type") == "text":
                texts.append(str(part.get("text") or ""))
            elif part.get("type") == "image_url":
                image = part.get("image_url")
                url = image.get("url") if isinstance(image, dict) else image
                if isinstance(url, str):
                    images.append(ImagePart(url=url))
        data["content"] = "\n".join(texts)
        data["images"] = images or None
    calls = data.pop("tool_calls", None)
    if calls:
        data.pop("role", None)
        return Message.from_tool_calls(calls, content=data.pop("content", ""), **data)
    return Message.model_validate(data)
