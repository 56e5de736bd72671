"""Our messages to the wire format (``formatting`` does the pass), and the reply back into a
``Message``: the adapter edge, where whatever a broken or hostile server sends becomes an
``LLMResponseError`` or a value the agent can show the model (valid UTF-8), never a traceback.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from app.exceptions import LLMResponseError
from app.llm.arguments import normalize_arguments
from app.llm.openai.formatting import prepare_messages
from app.logger import logger
from app.schema import Function, Message, ToolCall
from app.text import clean_text


def format_messages(
    messages: Iterable[Message], *, supports_images: bool = True, model: str = ""
) -> tuple[list[dict[str, Any]], int]:
    """Wire-format ``messages``; returns them (fresh dicts the caller may change) and the
    number of images left out."""
    result = prepare_messages(list(messages), supports_images=supports_images, model=model)
    return [_copy_wire(wire) for wire in result.messages], result.omitted


def _copy_wire(wire: dict[str, Any]) -> dict[str, Any]:
    copied = dict(wire)
    calls = copied.get("tool_calls")
    if isinstance(calls, list):
        copied["tool_calls"] = [
            {**call, "function": dict(call["function"])}
            if isinstance(call, dict) and isinstance(call.get("function"), dict)
            else call
            for call in calls
        ]
    return copied


@dataclass(slots=True)
class Completion:
    """A completion body, checked: the message, why it ended, the reasoning, the usage."""

    message: Message
    finish_reason: str | None
    reasoning: str | None
    usage: dict[str, Any] | None


def parse_completion(data: Any, model: str = "") -> Completion:
    """Check and read a chat-completion body (``LLMResponseError`` when it is not one)."""
    if not isinstance(data, dict):
        raise _bad(model, f"the body is a {type(data).__name__}, not an object")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        detail = data.get("error")
        if isinstance(detail, dict):
            detail = detail.get("message") or detail
        raise LLMResponseError(
            f"Model '{model}' returned no choices"
            + (f": {detail}" if detail else f" (got {str(data)[:200]})"),
            model=model,
        )
    choice = choices[0]
    if not isinstance(choice, dict):
        raise _bad(model, "choices[0] is not an object")
    raw = choice.get("message")
    if not isinstance(raw, dict):
        raise _bad(model, f"choices[0].message is {'null' if raw is None else 'not an object'}")
    finish = choice.get("finish_reason")
    message, reasoning = _message(raw, model)
    usage = data.get("usage")
    return Completion(
        message=message,
        finish_reason=finish if isinstance(finish, str) and finish else None,
        reasoning=reasoning,
        usage=usage if isinstance(usage, dict) else None,
    )


def _bad(model: str, what: str) -> LLMResponseError:
    return LLMResponseError(f"Model '{model}' returned a malformed reply: {what}", model=model)


def _message(data: dict[str, Any], model: str) -> tuple[Message, str | None]:
    content = _content(data.get("content"), model)
    if content:
        content = clean_text(content)  # whichever transport decoded it: valid UTF-8 from here
    reasoning = data.get("reasoning_content") or data.get("reasoning")
    if isinstance(reasoning, str):
        reasoning = clean_text(reasoning)
    thoughts = [reasoning.strip()] if isinstance(reasoning, str) and reasoning.strip() else []
    if content and _may_reason(content):
        from app.llm.text_tools import split_reasoning  # its regexes cost ~60 ms to import

        thought, answer = split_reasoning(content)
        if thought:
            thoughts.append(thought)
            content = answer or None
    calls = _tool_calls(data, model)
    return (
        Message(role="assistant", content=content, tool_calls=calls),
        "\n\n".join(thoughts) or None,
    )


def _may_reason(content: str) -> bool:
    lowered = content[:4096].lower() if len(content) > 4096 else content.lower()
    return "think" in lowered or "reasoning" in lowered or "</" in content


def _content(content: Any, model: str) -> str | None:
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):  # some servers answer with content parts
        texts = []
        for part in content:
            if not isinstance(part, dict):
                raise _bad(model, "a content part is not an object")
            text = part.get("text")
            if isinstance(text, str):
                texts.append(text)
        return "".join(texts)
    raise _bad(model, f"content is a {type(content).__name__}, not text")


def _tool_calls(data: dict[str, Any], model: str) -> list[ToolCall] | None:
    raw_calls = data.get("tool_calls")
    if raw_calls is None:
        legacy = data.get("function_call")
        if legacy is None:
            return None
        raw_calls = [{"type": "function", "function": legacy}]  # the pre-tools API
    if not isinstance(raw_calls, list):
        raise _bad(model, f"tool_calls is a {type(raw_calls).__name__}, not a list")
    if not raw_calls:
        return None
    calls = []
    for raw in raw_calls:
        if not isinstance(raw, dict):
            raise _bad(model, "a tool call is not an object")
        fn = raw.get("function")
        if not isinstance(fn, dict):
            raise _bad(model, "a tool call has no 'function' object")
        name = "" if fn.get("name") is None else fn["name"]
        if not isinstance(name, str):
            raise _bad(model, "a tool call's name is not text")
        name = clean_text(name)
        if not name.strip():
            # Kept, not dropped: the agent answers it with "unknown tool" and the model can
            # correct itself (llama.cpp's legacy function_call sometimes has an empty name).
            logger.warning(f"Model '{model}' called a tool with an empty name")
        call_id = raw.get("id")
        call_type = raw.get("type")
        calls.append(
            ToolCall(
                id=str(call_id)
                if isinstance(call_id, str | int) and call_id != ""
                else f"call_{uuid.uuid4().hex[:24]}",
                type=call_type if isinstance(call_type, str) else "function",
                function=Function(
                    name=name, arguments=clean_text(normalize_arguments(fn.get("arguments")))
                ),
            )
        )
    return calls
