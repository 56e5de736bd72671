"""``TextToolCalls``: a wrapper that describes the tools in the prompt and parses the calls
from the answer, for endpoints without function calling (``tool_calling = "text"``, or
``"auto"`` once the endpoint itself refused tools: the model's prose never marks it).

Tool results travel as user messages (some chat templates reject the ``tool`` role; runs are
merged, since templates also want roles to alternate); the agent sees the same ``Message``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from app.exceptions import ToolsNotSupportedError
from app.llm.arguments import loads_safely
from app.llm.model import Model, ModelParams, ModelResponse, ToolDefinition
from app.llm.refusals import Refusals
from app.logger import logger
from app.prompt.text_tools import TOOL_CHOICE_REQUIRED, TOOL_CHOICE_SPECIFIC
from app.schema import Message


class TextToolCalls:
    """Wraps ``inner``: tools in the prompt and calls parsed from the text when the endpoint
    is in text mode (``mode`` ``"text"``, or ``"auto"`` and ``refusals`` hold ``tools``)."""

    def __init__(self, inner: Model, refusals: Refusals, mode: str = "auto") -> None:
        self.inner = inner
        self.name = inner.name
        self.refusals = refusals
        self.mode = mode
        self._warned_prose_calls = False

    @property
    def text_mode(self) -> bool:
        return self.mode == "text" or (self.mode == "auto" and "tools" in self.refusals.features)

    async def request(self, messages: Sequence[Message], params: ModelParams) -> ModelResponse:
        if not params.tools:
            return await self.inner.request(messages, params)
        if self.text_mode:
            return await self._in_prompt(messages, params)
        try:
            response = await self.inner.request(messages, params)
        except ToolsNotSupportedError as e:
            if self.mode != "auto":
                raise
            await self.refusals.refuse("tools", e.message)
            return await self._in_prompt(messages, params)
        if params.tool_choice != "none" and response.message.content:
            self._note_prose_calls(response, params.tools)
        return response

    async def _in_prompt(self, messages: Sequence[Message], params: ModelParams) -> ModelResponse:
        plain = dataclasses.replace(params, tools=(), tool_choice="auto")
        if params.tool_choice == "none":
            return await self.inner.request(messages, plain)
        rewritten = text_mode_messages(messages, params.tools, params.tool_choice)
        response = await self.inner.request(rewritten, plain)
        return text_mode_response(response, [tool.name for tool in params.tools])

    def _note_prose_calls(self, response: ModelResponse, tools: Sequence[ToolDefinition]) -> None:
        """A native turn answered with a call in its text: never run nor remembered; warned
        once (a server that drops the tools needs ``tool_calling = "text"``)."""
        names = [tool.name for tool in tools]
        if not self._warned_prose_calls and text_mode_response(response, names) is not response:
            self._warned_prose_calls = True
            logger.warning(
                f"Model '{self.name}' wrote what looks like a tool call in its text instead "
                "of using the API's tool calls; it was not run. If the server leaves the tools "
                'out of the prompt (a model\'s own chat template), set tool_calling = "text" '
                "in its [llm] section."
            )


def text_mode_messages(
    messages: Sequence[Message | dict[str, Any]], tools: Sequence[ToolDefinition], tool_choice: Any
) -> list[Message]:
    """The messages rewritten for text mode (new list); a result without its call is dropped."""
    from app.llm.text_tools import render_tool_prompt, render_tool_result  # ~50 ms: on use

    prompt = render_tool_prompt([tool.to_param() for tool in tools])
    if tool_choice == "required":
        prompt += "\n" + TOOL_CHOICE_REQUIRED
    elif isinstance(tool_choice, dict):
        name = (tool_choice.get("function") or {}).get("name")
        if name:
            prompt += "\n" + TOOL_CHOICE_SPECIFIC.format(name=name)
    out: list[Message] = []
    names: dict[str, str] = {}  # call id -> tool name, for results without a name
    for raw in messages:
        message = raw if isinstance(raw, Message) else Message.model_validate(raw)
        if message.role == "assistant" and message.tool_calls:
            out.append(_assistant_text(message, names))
        elif message.role == "tool":
            call_id = message.tool_call_id or ""
            if call_id not in names:
                continue
            text = render_tool_result(
                message.name or names[call_id], call_id, message.content or ""
            )
            _append_user(out, text, message.base64_image)
        elif message.role == "user" and not message.base64_image:
            _append_user(out, message.content or "", None)
        else:
            out.append(message)
    index = next((i for i, m in enumerate(out) if m.role == "system"), None)
    if index is None:
        out.insert(0, Message.system_message(prompt))
    else:
        system = out[index]
        out[index] = system.model_copy(
            update={"content": f"{system.content or ''}\n\n{prompt}".lstrip()}
        )
    return out


def _assistant_text(message: Message, names: dict[str, str]) -> Message:
    blocks = []
    for call in message.tool_calls or ():
        names[call.id] = call.function.name
        try:
            arguments = loads_safely(call.function.arguments or "{}")
        except ValueError:
            arguments = call.function.arguments
        block = json.dumps({"name": call.function.name, "arguments": arguments}, ensure_ascii=False)
        blocks.append(f"<tool_call>{block}</tool_call>")
    text = "\n".join(([message.content] if message.content else []) + blocks)
    return Message.assistant_message(text)


def _append_user(out: list[Message], text: str, image: str | None) -> None:
    last = out[-1] if out else None
    if last is not None and last.role == "user" and not (image and last.base64_image):
        update: dict[str, Any] = {"content": f"{last.content or ''}\n\n{text}".lstrip()}
        if image:
            update["base64_image"] = image
        out[-1] = last.model_copy(update=update)
    else:
        out.append(Message.user_message(text, base64_image=image))


def text_mode_response(response: ModelResponse, names: list[str]) -> ModelResponse:
    """The calls written in the answer's text, made ``message.tool_calls``."""
    from app.llm.text_tools import parse_tool_calls  # its regexes cost ~50 ms to import

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
