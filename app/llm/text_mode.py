"""Tool calling without the API's ``tools``: for models and servers that have none.

A text-mode request carries no ``tools`` or ``tool_choice``. The tools are described at the
end of the system prompt (``app.llm.text_tools.render_tool_prompt``); the model's earlier calls
are shown in the same ``<tool_call>`` form it is asked to write; tool results travel as user
messages in a ``<tool_response>`` block, because some chat templates reject the ``tool`` role
(consecutive ones are merged, since templates also insist that roles alternate). Calls are
parsed back out of the answer (``parse_tool_calls``) into ``message.tool_calls`` with generated
ids, so the agent sees the same ``Message`` either way.
"""

from __future__ import annotations

import json
from typing import Any

from app.llm.arguments import loads_safely
from app.llm.formatting import Formatted
from app.llm.model import ModelResponse
from app.llm.text_tools import parse_tool_calls, render_tool_prompt, render_tool_result
from app.llm.wire import dumps
from app.prompt.text_mode import TOOL_CHOICE_REQUIRED, TOOL_CHOICE_SPECIFIC
from app.schema import Message

__all__ = ["text_mode_messages", "text_mode_response", "tool_names"]


def tool_names(tools: list[dict[str, Any]]) -> list[str]:
    names = []
    for tool in tools:
        function = tool.get("function")
        fn = function if isinstance(function, dict) else tool
        if isinstance(fn.get("name"), str):
            names.append(fn["name"])
    return names


def text_mode_messages(
    formatted: Formatted, tools: list[dict[str, Any]], tool_choice: Any
) -> Formatted:
    """The request's messages rewritten for text mode (the wire dicts are not changed)."""
    prompt = render_tool_prompt(tools)
    if tool_choice == "required":
        prompt += "\n" + TOOL_CHOICE_REQUIRED
    elif isinstance(tool_choice, dict):
        name = (tool_choice.get("function") or {}).get("name")
        if name:
            prompt += "\n" + TOOL_CHOICE_SPECIFIC.format(name=name)
    out: list[dict[str, Any]] = []
    names: dict[str, str] = {}  # call id -> tool name, for results without a name
    for wire in formatted.messages:
        role = wire.get("role")
        if role == "assistant" and wire.get("tool_calls"):
            out.append(_assistant_text(wire, names))
        elif role == "tool":
            call_id = str(wire.get("tool_call_id") or "")
            name = wire.get("name") or names.get(call_id, "")
            content = wire.get("content")
            text = content if isinstance(content, str) else json.dumps(content)
            _append_user(out, render_tool_result(str(name), call_id, text))
        elif role == "user" and isinstance(wire.get("content"), str):
            _append_user(out, wire["content"])
        else:
            out.append(dict(wire))
    system = next((m for m in out if m.get("role") == "system"), None)
    if system is None:
        out.insert(0, {"role": "system", "content": prompt})
    elif isinstance(system.get("content"), list):
        system["content"] = [*system["content"], {"type": "text", "text": prompt}]
    else:
        system["content"] = f"{system.get('content') or ''}\n\n{prompt}".lstrip()
    return Formatted(out, [None] * len(out), [dumps(m) for m in out], formatted.omitted)


def _assistant_text(wire: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    blocks = []
    for call in wire["tool_calls"]:
        fn = call.get("function") or {}
        names[str(call.get("id"))] = fn.get("name", "")
        try:
            arguments = loads_safely(fn.get("arguments") or "{}")
        except ValueError:
            arguments = fn.get("arguments")
        block = json.dumps({"name": fn.get("name", ""), "arguments": arguments}, ensure_ascii=False)
        blocks.append(f"<tool_call>{block}</tool_call>")
    content = wire.get("content")
    text = "\n".join(([content] if isinstance(content, str) and content else []) + blocks)
    return {"role": "assistant", "content": text}


def _append_user(out: list[dict[str, Any]], text: str) -> None:
    last = out[-1] if out else None
    if last is not None and last.get("role") == "user" and isinstance(last.get("content"), str):
        last["content"] = f"{last['content']}\n\n{text}"
    else:
        out.append({"role": "user", "content": text})


def text_mode_response(response: ModelResponse, names: list[str]) -> ModelResponse:
    """The calls written in the answer's text, made ``message.tool_calls``."""
    content = response.message.content or ""
    parsed = parse_tool_calls(content, names)
    if not parsed.calls:
        return response
    message = Message(
        role="assistant", content=parsed.content.strip() or None, tool_calls=parsed.calls
    )
    return ModelResponse(
        message=message,
        usage=response.usage,
        finish_reason="tool_calls",
        reasoning=response.reasoning,
    )
