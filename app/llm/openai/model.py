"""``OpenAIChatModel``: an OpenAI-compatible chat-completions endpoint as a :class:`Model`. The
body is the messages' cached JSON joined with the tools' and fields' (re-encoded only when
they change); ``exchange`` sends it through a ``transport``.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from app.llm.capabilities import model_flags
from app.llm.model import ModelParams, ModelResponse, ToolDefinition
from app.llm.openai.exchange import TurnExchange
from app.llm.openai.formatting import Formatted, prepare_messages
from app.llm.openai.streaming import DeltaRelay
from app.llm.openai.transport import Transport
from app.llm.openai.wire import dumps, encode_body
from app.llm.usage import Usage
from app.logger import logger
from app.schema import Message

if TYPE_CHECKING:
    from app.config import LLMSettings
    from app.llm.refusals import Refusals

__all__ = ["OpenAIChatModel"]

#: Types whose values cannot change in place (a cached encoding of them stays true).
_PLAIN = frozenset({str, int, float, bool, type(None)})


class OpenAIChatModel:
    """One endpoint and model of a profile (``settings``); what the endpoint refused is kept
    in ``refusals``. Messages may also be upstream's plain dicts (``ask_with_images`` sends
    content parts)."""

    def __init__(
        self, settings: LLMSettings, refusals: Refusals, transport: Transport | None = None
    ) -> None:
        self.name = settings.model
        self.settings = settings
        self.refusals = refusals
        self.exchange = TurnExchange(settings, refusals, transport)
        self.is_reasoning_model, self.supports_images = model_flags(settings)
        self._tools_cache: tuple[Sequence[ToolDefinition], bytes] | None = None
        self._fields_cache: tuple[dict[str, Any], tuple[type, ...], bytes] | None = None
        self._warned_images = False

    @property
    def transport(self) -> Transport:
        return self.exchange.transport

    async def aclose(self) -> None:
        await self.exchange.aclose()

    def images_allowed(self) -> bool:
        return self.supports_images and "images" not in self.refusals.features

    def prepare(self, messages: Sequence[Message | dict[str, Any]]) -> Formatted:
        """The messages in wire format (the leading system prompt apart, so the conversation's
        first message keeps the cached formatting of the previous request)."""
        split = 0
        for message in messages:
            role = message.role if isinstance(message, Message) else message.get("role")
            if role != "system":
                break
            split += 1
        formatted = prepare_messages(
            messages[split:] if split else messages,
            system=messages[:split] if split else None,
            supports_images=self.images_allowed(),
            model=self.name,
        )
        self.warn_omitted(formatted.omitted)
        return formatted

    def warn_omitted(self, omitted: int) -> None:
        """Say once that images were left out for a model not configured for them."""
        if omitted and not self._warned_images:
            self._warned_images = True
            logger.warning(
                f"Model '{self.name}' is not configured for images; {omitted} image(s) were "
                "replaced by a note. Set supports_images = true in its [llm] section if it "
                "accepts them."
            )

    async def request(
        self, messages: Sequence[Message | dict[str, Any]], params: ModelParams
    ) -> ModelResponse:
        formatted = self.prepare(messages)
        fields: dict[str, Any] = {"model": self.name}
        max_tokens = self.settings.max_tokens if params.max_tokens is None else params.max_tokens
        if self.is_reasoning_model:
            fields["max_completion_tokens"] = max_tokens
        else:
            fields["max_tokens"] = max_tokens
            fields["temperature"] = (
                self.settings.temperature if params.temperature is None else params.temperature
            )
        fields.update(params.extra)
        fields.pop("messages", None)
        fields.pop("tools", None)
        tools = self._tools_json(params.tools) if params.tools else None
        if tools is not None:
            fields["tool_choice"] = params.tool_choice

        def build(stream: bool) -> bytes:
            body = {**fields, "stream": True, "stream_options": {"include_usage": True}}
            return encode_body(
                formatted.fragments, self._fields_json(body if stream else fields), tools
            )

        relay = DeltaRelay(params.on_delta) if params.on_delta is not None else None
        completion = await self.exchange.exchange(
            build,
            tools=tools is not None,
            timeout=params.timeout or self.settings.timeout,
            max_retries=self.settings.max_retries,
            relay=relay,
            stream=params.stream,
        )
        message = completion.message
        if completion.finish_reason == "length" and not message.tool_calls:
            logger.warning(f"The answer of model '{self.name}' was cut at max_tokens={max_tokens}")
        return ModelResponse(
            message=message,
            usage=Usage.from_api(completion.usage) or Usage(),
            finish_reason=completion.finish_reason,
            reasoning=completion.reasoning,
        )

    def _fields_json(self, fields: dict[str, Any]) -> bytes:
        """The body's other fields as JSON, reused while they stay the same plain values
        (they do from one step to the next)."""
        kinds = tuple(map(type, fields.values()))  # 1 == 1.0 == True, but not in JSON
        cached = self._fields_cache
        if cached is not None and cached[1] == kinds and cached[0] == fields:
            return cached[2]
        encoded = dumps(fields)
        if _PLAIN.issuperset(kinds):  # nothing that could be edited in place
            self._fields_cache = (fields, kinds, encoded)
        return encoded

    def _tools_json(self, tools: Sequence[ToolDefinition]) -> bytes:
        """The tool definitions' JSON, re-encoded only when they change (an agent offers the
        same tools at every step; comparing them is far cheaper than encoding them)."""
        cached = self._tools_cache
        if cached is not None and (cached[0] is tools or cached[0] == tools):
            return cached[1]
        encoded = dumps([tool.to_param() for tool in tools])
        self._tools_cache = (copy.deepcopy(tools), encoded)
        return encoded
