"""A wire-level double of an OpenAI-compatible endpoint: a Python function answers each
chat-completions request body, in process.

``FunctionTransport(fn)`` is a transport that never opens a socket (docs/llm.md):
``LLM.create(llm_config=..., transport=FunctionTransport(fn))``. ``fn(messages, info)`` gets
the body's wire messages (dicts) and returns a ``str``, a ``ModelResponse`` or a ``dict`` (a
whole completion or just the message), or raises an ``LLMError``; it may be async.
Everything above the transport (``OpenAIChatModel``'s formatting and stream policy, retries,
parsing, usage, streaming to ``on_delta``) runs as it does over HTTP. A model on our typed
messages, with no wire format at all, is :class:`app.testing.FunctionModel`.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from app.llm.deltas import deliver
from app.llm.model import ModelResponse
from app.llm.openai.transport import ChatRequest, Transport
from app.testing.replies import Usage

_WORDS = re.compile(r"\S+\s*|\s+")


@dataclass(frozen=True, slots=True)
class TransportInfo:
    """What the function may want besides the wire messages."""

    index: int  # 0 for the first request this model answers
    model: str
    tools: list[dict[str, Any]] | None
    tool_choice: Any
    stream: bool
    body: dict[str, Any] = field(repr=False)


WireFunction = Callable[[list[dict[str, Any]], TransportInfo], Any | Awaitable[Any]]


class FunctionTransport(Transport):
    """A transport answered by ``fn``; ``requests`` keeps every request body, in order."""

    name = "function"
    endpoint = "function://"

    def __init__(self, fn: WireFunction) -> None:
        self.fn = fn
        self.requests: list[dict[str, Any]] = []

    async def send(self, request: ChatRequest) -> dict[str, Any]:
        body = json.loads(request.body)
        info = TransportInfo(
            index=len(self.requests),
            model=request.model,
            tools=body.get("tools"),
            tool_choice=body.get("tool_choice"),
            stream=request.stream,
            body=body,
        )
        self.requests.append(body)
        outcome = self.fn(body.get("messages") or [], info)
        if inspect.isawaitable(outcome):
            outcome = await outcome
        data = _completion(outcome, body)
        if request.stream:
            choices = data.get("choices")
            message = (
                choices[0].get("message")
                if isinstance(choices, list) and choices and isinstance(choices[0], dict)
                else None
            )
            text = message.get("content") if isinstance(message, dict) else None
            if isinstance(text, str):
                for piece in _WORDS.findall(text):
                    await deliver(request.on_delta, piece)
        return data


def _completion(outcome: Any, body: dict[str, Any]) -> dict[str, Any]:
    if isinstance(outcome, str):
        message: dict[str, Any] = {"role": "assistant", "content": outcome}
        finish: str | None = "stop"
        usage = None
    elif isinstance(outcome, ModelResponse):
        message = outcome.message.to_dict()
        message.pop("base64_image", None)
        if outcome.reasoning:
            message["reasoning_content"] = outcome.reasoning
        finish = outcome.finish_reason or ("tool_calls" if outcome.message.tool_calls else "stop")
        usage = (
            outcome.usage.model_dump(include={"prompt_tokens", "completion_tokens", "total_tokens"})
            if outcome.usage.requests or outcome.usage.total_tokens
            else None
        )
    elif isinstance(outcome, dict) and "choices" in outcome:
        return outcome
    elif isinstance(outcome, dict):
        message = {"role": "assistant", **outcome}
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        usage = None
    else:
        raise TypeError(
            "a FunctionTransport function must return a str, a ModelResponse or a dict, not "
            f"{type(outcome).__name__}"
        )
    if usage is None:  # cheap and deterministic: no tokenizer involved
        prompt = len(json.dumps(body.get("messages") or [])) // 4
        completion = len(json.dumps(message)) // 4
        usage = Usage(prompt, completion, prompt + completion).to_json()
    return {
        "object": "chat.completion",
        "usage": usage,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    }
