"""``TestModel``: a :class:`~app.llm.Model` that exercises every tool it is offered.

Like pydantic-ai's test model it needs no function and no server (docs/llm.md): it calls each
offered tool once with arguments made from its schema, then finishes (``terminate`` when
offered, else a text answer listing the results). Checks that an agent's tools are wired.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from app.llm.model import ModelParams, ModelResponse, ToolDefinition
from app.llm.usage import Usage
from app.schema import Message, ToolCall

#: Tools that end a run; called last, never in the first round.
FINISHING_TOOLS = ("terminate",)


class TestModel:
    """Calls ``call_tools`` (default: every offered tool but ``terminate``), then finishes.

    ``requests`` keeps the messages and params of every request, in order.
    """

    __test__ = False  # not a pytest test class, despite the name

    def __init__(
        self,
        call_tools: Iterable[str] | None = None,
        *,
        final_text: str | None = None,
        name: str = "test",
    ) -> None:
        self.name = name
        self.call_tools = None if call_tools is None else tuple(call_tools)
        self.final_text = final_text
        self.requests: list[tuple[list[Message], ModelParams]] = []

    async def request(self, messages: Sequence[Message], params: ModelParams) -> ModelResponse:
        self.requests.append((list(messages), params))
        offered = {t.name: t for t in params.tools}
        results = _results_of_last_round(messages)
        if params.tool_choice != "none" and results is None:
            chosen = [
                offered[n]
                for n in (self.call_tools if self.call_tools is not None else offered)
                if n in offered and n not in FINISHING_TOOLS
            ]
            if chosen:
                return self._calls(chosen, len(self.requests))
        if params.tool_choice != "none" and "terminate" in offered:
            done = ToolDefinition("terminate")
            return self._calls([done], len(self.requests), {"terminate": {"status": "success"}})
        text = self.final_text or json.dumps(results or {}, ensure_ascii=False)
        message = Message.assistant_message(text)
        return ModelResponse(message=message, usage=_usage(messages, text), finish_reason="stop")

    def _calls(
        self,
        tools: list[ToolDefinition],
        turn: int,
        arguments: dict[str, dict[str, Any]] | None = None,
    ) -> ModelResponse:
        calls = [
            ToolCall.function_call(
                tool.name,
                (arguments or {}).get(tool.name) or example_arguments(tool.parameters),
                id=f"call_{turn}_{i}",
            )
            for i, tool in enumerate(tools)
        ]
        message = Message(role="assistant", tool_calls=calls)
        usage = _usage([], "".join(c.function.arguments for c in calls))
        return ModelResponse(message=message, usage=usage, finish_reason="tool_calls")


def example_arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """Arguments that fit an object schema: every required property, with a default, an
    enum's first value or a simple value of its type."""
    value = _example(schema, schema.get("$defs") or {})
    return value if isinstance(value, dict) else {}


def _example(schema: Any, defs: dict[str, Any], depth: int = 0) -> Any:
    if not isinstance(schema, dict) or depth > 8:
        return None
    if "$ref" in schema:
        return _example(defs.get(str(schema["$ref"]).rsplit("/", 1)[-1]), defs, depth + 1)
    if "default" in schema:
        return schema["default"]
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        options = [o for o in schema.get(key) or () if o.get("type") != "null"]
        if options:
            return _example(options[0], defs, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind == "object" or (kind is None and "properties" in schema):
        props = schema.get("properties") or {}
        required = schema.get("required") or []
        return {name: _example(props.get(name), defs, depth + 1) for name in required}
    if kind == "array":
        count = int(schema.get("minItems") or 0)
        return [_example(schema.get("items"), defs, depth + 1) for _ in range(count)]
    if kind == "string":
        return "a" * max(1, int(schema.get("minLength") or 1))
    if kind == "integer":
        return int(schema.get("minimum") or 0)
    if kind == "number":
        return float(schema.get("minimum") or 0)
    if kind == "boolean":
        return False
    return None


def _results_of_last_round(messages: Sequence[Message]) -> dict[str, str] | None:
    """The results of the tools the last assistant message called, by tool name; None when
    a new round starts (no call yet, or the last one ended a task)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.role != "assistant":
            continue
        calls = message.tool_calls or []
        if not calls or any(c.function.name in FINISHING_TOOLS for c in calls):
            return None
        return {
            m.name or m.tool_call_id or "tool": m.content or ""
            for m in messages[index + 1 :]
            if m.role == "tool"
        }
    return None


def _usage(messages: Sequence[Message], text: str) -> Usage:
    """Deterministic, tokenizer-free usage: four characters a token."""
    prompt = sum(len(m.content or "") for m in messages) // 4 + 1
    completion = len(text) // 4 + 1
    total = prompt + completion
    return Usage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=total, requests=1)
