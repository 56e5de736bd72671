"""``FunctionModel``: a :class:`~app.llm.Model` answered by a Python function, on our typed
messages: for fast tests, and for a rule-based model in a few lines (docs/llm.md).

``fn(messages, info)`` gets the request's ``Message``s and a :class:`FunctionInfo`, and
returns the turn: a ``str`` (the answer), a ``ToolCall`` or a list of them (made with
``ToolCall.function_call("add", {"a": 2, "b": 3})``), a ``Message`` or a whole
``ModelResponse``; or it raises an ``LLMError`` (an ``LLMTransientError`` is retried like any
model's). It may be async; a sync one runs on the event loop, so keep it quick. Text goes to
``on_delta`` word by word; usage the function does not give is estimated (four characters a
token, deterministic, marked ``estimated``).

    agent = ToolCallAgent(model=FunctionModel(lambda messages, info: "Done."))
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from app.llm.deltas import deliver
from app.llm.model import ModelParams, ModelResponse, ToolDefinition
from app.llm.usage import Usage
from app.schema import Message, ToolCall

_WORDS = re.compile(r"\S+\s*|\s+")


@dataclass(frozen=True, slots=True)
class FunctionInfo:
    """What the function may want besides the messages: ``index`` (0 for the first request
    this model answers), the offered ``tools`` and every other parameter (``params``)."""

    index: int
    tools: tuple[ToolDefinition, ...]
    params: ModelParams

    @property
    def tool_names(self) -> list[str]:
        return [tool.name for tool in self.tools]


#: What the function may return for a turn.
Turn = str | ToolCall | Sequence[ToolCall] | Message | ModelResponse
ModelFunction = Callable[[list[Message], FunctionInfo], Turn | Awaitable[Turn]]


class FunctionModel:
    """A model answered by ``fn``; ``requests`` keeps the messages and params of every
    request, in order."""

    def __init__(self, fn: ModelFunction, *, name: str = "function") -> None:
        self.name = name
        self.fn = fn
        self.requests: list[tuple[list[Message], ModelParams]] = []

    async def request(self, messages: Sequence[Message], params: ModelParams) -> ModelResponse:
        given = list(messages)
        info = FunctionInfo(len(self.requests), tuple(params.tools), params)
        self.requests.append((given, params))
        outcome = self.fn(list(given), info)
        if inspect.isawaitable(outcome):
            outcome = await outcome
        response = _response(outcome)
        text = response.message.content
        if params.on_delta is not None and text:
            for piece in _WORDS.findall(text):
                await deliver(params.on_delta, piece)
        if not (response.usage.requests or response.usage.total_tokens):
            response.usage = _estimate(given, response.message)
        return response


def _response(outcome: Any) -> ModelResponse:
    if isinstance(outcome, ModelResponse):
        if outcome.finish_reason is None:
            outcome.finish_reason = "tool_calls" if outcome.message.tool_calls else "stop"
        return outcome
    if isinstance(outcome, str):
        message = Message.assistant_message(outcome)
    elif isinstance(outcome, ToolCall):
        message = Message(role="assistant", tool_calls=[outcome])
    elif isinstance(outcome, Message):
        if outcome.role != "assistant":
            raise TypeError(f"a FunctionModel function returned a {outcome.role} message")
        message = outcome
    elif (
        isinstance(outcome, list | tuple)
        and outcome
        and all(isinstance(item, ToolCall) for item in outcome)
    ):
        message = Message(role="assistant", tool_calls=list(outcome))
    else:
        raise TypeError(
            "a FunctionModel function must return a str, a ToolCall (or a list of them), "
            f"a Message or a ModelResponse, not {type(outcome).__name__}"
        )
    finish = "tool_calls" if message.tool_calls else "stop"
    return ModelResponse(message=message, finish_reason=finish)


def _estimate(messages: list[Message], answer: Message) -> Usage:
    """Deterministic, tokenizer-free usage: four characters a token."""
    prompt = len(json.dumps([m.to_dict() for m in messages])) // 4
    completion = len(json.dumps(answer.to_dict())) // 4
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=prompt + completion,
        requests=1,
        estimated=True,
    )
