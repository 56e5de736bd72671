"""``AnthropicModel``: Anthropic's Messages API as a :class:`~app.llm.model.Model`, through
the official SDK (the ``anthropic`` extra, imported on the first request).

One attempt per request (the SDK's own retries are off: the LLM layer's retry wrapper is the
one retry path). Text is streamed to ``on_delta`` when it is set. Extended thinking
(``thinking``) is kept out of the answer and its blocks go back unchanged; prompt
caching (``prompt_cache``, on by default) marks the stable prefix (``caching.py``).
"""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import os
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import httpx2

from app.exceptions import ConfigError, LLMAuthenticationError
from app.install_hint import pip_install
from app.llm.anthropic.caching import mark_breakpoints
from app.llm.anthropic.errors import error_from_body, malformed, stream_broken, translate_error
from app.llm.anthropic.messages import Conversation, format_conversation
from app.llm.anthropic.response import StreamAssembly, response_from_message
from app.llm.deltas import deliver
from app.llm.model import DeltaCallback, ModelParams, ModelResponse, ToolDefinition
from app.logger import register_secret
from app.schema import Message

if TYPE_CHECKING:
    from app.config import LLMSettings

#: The smallest thinking budget the API accepts.
MIN_THINKING_BUDGET = 1024
#: Request fields of ``ModelParams.extra`` the API has (``stop`` is ours for ``stop_sequences``).
#: No sampling fields: the API refuses ``temperature``, ``top_p`` and ``top_k`` (version
#: 2026-10-21, and the newest models on any version), so a temperature is never sent.
_EXTRA_FIELDS = ("metadata", "stop_sequences", "service_tier")
_VERSION_SUFFIX = re.compile(r"/v1$")
_UNSET: Any = object()


class AnthropicModel:
    """A Claude model behind Anthropic's Messages API (``api_type = "anthropic"``).

    ``thinking`` turns extended thinking on: ``"adaptive"`` (the model decides how much; Claude
    4.6 and later) or a budget in tokens (at least 1,024 and below ``max_tokens``; the models
    before 4.6). ``prompt_cache`` marks cache breakpoints. Both default to the settings' fields
    of those names (``thinking``, else ``thinking_budget``; thinking off, caching on).
    """

    def __init__(
        self,
        settings: LLMSettings,
        *,
        thinking: int | str | None = _UNSET,
        prompt_cache: bool = _UNSET,
    ) -> None:
        self.settings = settings
        self.name = settings.model
        if thinking is _UNSET:
            thinking = getattr(settings, "thinking", None) or getattr(
                settings, "thinking_budget", None
            )
        if prompt_cache is _UNSET:
            prompt_cache = getattr(settings, "prompt_cache", True)
        self.thinking = _thinking_mode(thinking, settings.max_tokens)
        self.prompt_cache = bool(prompt_cache)
        register_secret(settings.api_key)
        self.base_url = _base_url(settings.base_url)
        self._client: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def from_settings(cls, settings: LLMSettings) -> AnthropicModel:
        """The model a profile with ``api_type = "anthropic"`` names; a clear error when the
        SDK is not installed (it is imported on the first request)."""
        if importlib.util.find_spec("anthropic") is None:
            raise ConfigError(
                f"Model '{settings.model}' has api_type \"anthropic\", which needs the "
                f"anthropic SDK: {pip_install('anthropic')}"
            )
        return cls(settings)

    @property
    def endpoint(self) -> str:
        """Where requests go (for messages)."""
        return self.base_url or os.environ.get("ANTHROPIC_BASE_URL") or "https://api.anthropic.com"

    # ---- the request -------------------------------------------------------------------------

    def request_body(self, messages: Sequence[Message], params: ModelParams) -> dict[str, Any]:
        """The JSON body of a request (what the SDK sends, ``stream`` aside)."""
        settings = self.settings
        conversation = format_conversation(messages)
        tools = [_tool_param(tool) for tool in params.tools]
        max_tokens = params.max_tokens or settings.max_tokens
        body: dict[str, Any] = {"model": self.name, "max_tokens": max_tokens}
        thinking = self._thinking(conversation, params, max_tokens)
        if thinking is not None:
            body["thinking"] = thinking
        if self.prompt_cache:
            mark_breakpoints(tools, conversation.system, conversation.messages)
        if conversation.system:
            body["system"] = conversation.system
        body["messages"] = conversation.messages
        if tools:
            body["tools"] = tools
            body["tool_choice"] = _tool_choice(params.tool_choice)
        for key, value in params.extra.items():
            if key == "stop" and value:
                body["stop_sequences"] = [value] if isinstance(value, str) else list(value)
            elif key in _EXTRA_FIELDS:
                body[key] = value
        return body

    async def request(self, messages: Sequence[Message], params: ModelParams) -> ModelResponse:
        body = self.request_body(messages, params)
        client = self._sdk()
        timeout = params.timeout or self.settings.timeout
        streamed = self._streams(params)
        import anthropic

        try:
            if streamed:
                return await self._streamed(client, body, timeout, params.on_delta)
            message = await client.messages.create(**body, timeout=timeout)
        except anthropic.APIError as e:
            raise translate_error(e, model=self.name, endpoint=self.endpoint) from e
        except ValueError as e:  # a body or an event that is no JSON
            raise malformed(e, model=self.name, endpoint=self.endpoint) from e
        response = response_from_message(message.to_dict(warnings=False), self.name)
        await deliver(params.on_delta, response.message.content)
        return response

    async def _streamed(
        self, client: Any, body: dict[str, Any], timeout: float, on_delta: DeltaCallback | None
    ) -> ModelResponse:
        assembly = StreamAssembly()
        stream = await client.messages.create(**body, stream=True, timeout=timeout)
        try:
            async for event in stream:
                data = event.to_dict(warnings=False)
                if data.get("type") == "error":  # an SDK that hands it over as an event
                    raise error_from_body(None, data, model=self.name, endpoint=self.endpoint)
                piece = assembly.feed(data)
                if piece:
                    await deliver(on_delta, piece)
        except httpx2.TransportError as e:
            raise stream_broken(
                e, model=self.name, endpoint=self.endpoint, events=assembly.events
            ) from e
        finally:
            await stream.close()
        return assembly.response(self.name)

    def _streams(self, params: ModelParams) -> bool:
        """Stream when asked to, else when the text is watched (unless the profile says
        ``stream = false``)."""
        if params.stream is not None:
            return params.stream
        setting = self.settings.stream
        return setting if isinstance(setting, bool) else params.on_delta is not None

    def _thinking(
        self, conversation: Conversation, params: ModelParams, max_tokens: int
    ) -> dict[str, Any] | None:
        """The ``thinking`` field, or None for a request that cannot think: a forced tool
        choice, a ``max_tokens`` within the budget, or a tool loop whose last assistant turn
        has no thinking block to send back (the API wants one there: thinking stays off
        until the loop ends, as it was when that turn was written)."""
        mode = self.thinking
        if mode is None or (isinstance(mode, int) and max_tokens <= mode):
            return None
        if params.tools and params.tool_choice not in ("auto", "none"):
            return None
        if not _loop_turn_thinks(conversation.messages):
            return None
        if mode == "adaptive":
            return {"type": "adaptive"}
        return {"type": "enabled", "budget_tokens": mode}

    def _sdk(self) -> Any:
        """The SDK's client, one per event loop (a connection pool cannot outlive its loop)."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            key = self.settings.api_key or os.environ.get("ANTHROPIC_API_KEY")
            token = os.environ.get("ANTHROPIC_AUTH_TOKEN")
            if not key and not token:
                raise LLMAuthenticationError(
                    f"No API key for model '{self.name}': set `api_key` in its [llm] profile "
                    "or the ANTHROPIC_API_KEY environment variable",
                    model=self.name,
                )
            register_secret(key)
            register_secret(token)
            import anthropic

            # A client of our own: the SDK's default one closes itself from ``__del__`` on
            # whatever loop runs then, which fails for one of a finished loop.
            limit = self.settings.max_concurrent_requests
            http = anthropic.DefaultAsyncHttpxClient(
                limits=httpx2.Limits(max_connections=limit, max_keepalive_connections=limit)
            )
            options: dict[str, Any] = {}
            if "open_telemetry" in inspect.signature(anthropic.AsyncAnthropic).parameters:
                options["open_telemetry"] = False  # our own traces cover model calls
            self._client = anthropic.AsyncAnthropic(
                api_key=key or None,
                auth_token=None if key else token,
                base_url=self.base_url,
                max_retries=0,
                http_client=http,
                **options,
            )
            self._loop = loop
        return self._client

    async def aclose(self) -> None:
        """Close the client's connections (a client of another, finished loop is dropped)."""
        client, self._client = self._client, None
        if client is not None and self._loop is asyncio.get_running_loop():
            await client.close()


def _loop_turn_thinks(turns: list[dict[str, Any]]) -> bool:
    """False when the conversation ends in a tool loop (tool results after the last
    assistant turn's calls) and that assistant turn does not start with thinking."""
    if len(turns) < 2 or turns[-1]["role"] != "user" or turns[-2]["role"] != "assistant":
        return True
    first_result = turns[-1]["content"][0].get("type") == "tool_result"
    assistant = turns[-2]["content"]
    if not first_result or not any(block["type"] == "tool_use" for block in assistant):
        return True
    return assistant[0]["type"] in ("thinking", "redacted_thinking")


def _tool_param(tool: ToolDefinition) -> dict[str, Any]:
    schema = dict(tool.parameters) if isinstance(tool.parameters, dict) else {}
    schema.setdefault("type", "object")
    param: dict[str, Any] = {"name": tool.name, "input_schema": schema}
    if tool.description:
        param["description"] = tool.description
    return param


def _tool_choice(choice: str | dict[str, Any]) -> dict[str, Any]:
    """Ours (``auto``, ``none``, ``required``, ``{"type": "function", ...}``) as the API's."""
    if isinstance(choice, dict):
        function = choice.get("function")
        name = function.get("name") if isinstance(function, dict) else choice.get("name")
        if isinstance(name, str) and name:
            return {"type": "tool", "name": name}
        return {"type": "any"}
    return {"type": {"required": "any", "none": "none"}.get(choice, "auto")}


def _base_url(url: str | None) -> str | None:
    """The API's root: the SDK adds ``/v1/messages``, so a URL ending in ``/v1`` (upstream's
    example config has ``https://api.anthropic.com/v1/``) loses it."""
    if not url:
        return None
    return _VERSION_SUFFIX.sub("", url.rstrip("/")) or url


def _thinking_mode(value: Any, max_tokens: int) -> int | str | None:
    """``"adaptive"``, a checked budget, or None (off: None, False, 0, ``"off"``)."""
    if value is None or value is False or value == 0:
        return None
    if isinstance(value, str):
        word = value.strip().lower()
        if word in ("", "off", "false", "none"):
            return None
        if word == "adaptive":
            return "adaptive"
        if not word.isdigit():
            raise ConfigError(f'thinking must be "adaptive" or a budget in tokens, got {value!r}')
        value = int(word)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ConfigError(f'thinking must be "adaptive" or a budget in tokens, got {value!r}')
    _check_budget(value, max_tokens)
    return value


def _check_budget(budget: int, max_tokens: int) -> None:
    if budget < MIN_THINKING_BUDGET:
        raise ConfigError(
            f"a thinking budget must be at least {MIN_THINKING_BUDGET} tokens, got {budget}"
        )
    if budget >= max_tokens:
        raise ConfigError(
            f"the thinking budget ({budget}) must be smaller than max_tokens ({max_tokens}): "
            "the thinking is part of the answer's tokens"
        )
