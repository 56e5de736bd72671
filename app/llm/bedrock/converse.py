"""Our messages and params as a Converse request body (the same for ConverseStream).

Converse is stricter than chat completions, and the conversation is made to fit it rather
than refused: system prompts go to ``system``; roles alternate (neighbours of one role are
merged; tool results are ``toolResult`` blocks of a user turn, every ``toolUse`` answered);
the first turn is the user's; no text block is blank. Without tools in the request (none
offered, or ``tool_choice="none"``, which Converse lacks) earlier calls and results are sent
as text, since ``toolUse`` blocks need a ``toolConfig``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from app.llm.arguments import parse_arguments
from app.llm.bedrock.images import image_block, is_remote, remote_note
from app.llm.model import ModelParams, ToolDefinition
from app.schema import Message

#: Who wrote a reasoning block that goes back to Bedrock (``ThinkingBlock.provider``).
PROVIDER = "bedrock"
#: Converse request fields ``ModelParams.extra`` may carry, sent as given.
PASSED_FIELDS = frozenset(
    {
        "additionalModelRequestFields",
        "additionalModelResponseFieldPaths",
        "guardrailConfig",
        "performanceConfig",
        "promptVariables",
        "requestMetadata",
        "serviceTier",
    }
)
#: ``extra`` keys with an ``inferenceConfig`` field of their own (chat-completions names too).
INFERENCE_FIELDS = {
    "stop": "stopSequences",
    "stopSequences": "stopSequences",
    "top_p": "topP",
    "topP": "topP",
}
#: What stands for a turn with nothing to say (Converse refuses blank text).
EMPTY = "(empty)"
NO_OUTPUT = "(no output)"
NO_RESULT = "(no result was recorded for this call)"
CONTINUED = "(conversation continues)"


@dataclass
class ConverseRequest:
    """A request body, and the ``extra`` keys it had no place for (to be reported)."""

    body: dict[str, Any]
    ignored: list[str] = field(default_factory=list)


def converse_request(
    messages: Sequence[Message],
    params: ModelParams,
    *,
    model: str,
    thinking_budget: int | None = None,
    cache: bool = False,
) -> ConverseRequest:
    """The Converse body for ``messages`` under ``params`` (``model`` names it in errors).
    ``thinking_budget`` enables Claude's extended thinking (its temperature is then the
    model's, and the model chooses its tools); ``cache`` puts cache points on the stable
    prefix: the tools, the system prompt, and the ends of the last two user turns (the
    previous request's last point, read back, and this one's, written)."""
    tools_on = bool(params.tools) and params.tool_choice != "none"
    system = [{"text": m.content} for m in messages if m.role == "system" and _filled(m.content)]
    turns = _Turns(tools_on, model)
    for message in messages:
        if message.role != "system":
            turns.add(message)
    body: dict[str, Any] = {"messages": turns.finish()}
    if system:
        body["system"] = system
    inference: dict[str, Any] = {}
    if params.max_tokens is not None:
        inference["maxTokens"] = params.max_tokens
    if params.temperature is not None and thinking_budget is None:
        inference["temperature"] = params.temperature
    request = ConverseRequest(body)
    for key, value in params.extra.items():
        if key in INFERENCE_FIELDS:
            stops = [value] if isinstance(value, str) else value
            inference[INFERENCE_FIELDS[key]] = (
                stops if INFERENCE_FIELDS[key] == "stopSequences" else value
            )
        elif key == "inferenceConfig" and isinstance(value, dict):
            inference.update(value)
        elif key in PASSED_FIELDS:
            body[key] = value
        else:
            request.ignored.append(key)
    if inference:
        body["inferenceConfig"] = inference
    if tools_on:
        choice = "auto" if thinking_budget is not None else params.tool_choice
        body["toolConfig"] = tool_config(params.tools, choice)
    if thinking_budget is not None:
        fields = dict(body.get("additionalModelRequestFields") or {})
        fields.setdefault("thinking", {"type": "enabled", "budget_tokens": thinking_budget})
        body["additionalModelRequestFields"] = fields
    if cache:
        _cache_points(body)
    return request


#: A cache point: the prefix before it may be cached.
CACHE_POINT = {"cachePoint": {"type": "default"}}


def _cache_points(body: dict[str, Any]) -> None:
    """Cache points (Converse allows four) after the tools, the system prompt and the last
    two user turns; a prefix too short to cache is passed over by the service."""
    if "toolConfig" in body:
        body["toolConfig"]["tools"].append(dict(CACHE_POINT))
    if "system" in body:
        body["system"].append(dict(CACHE_POINT))
    users = [turn for turn in body["messages"] if turn["role"] == "user"]
    for turn in users[-2:]:
        turn["content"].append(dict(CACHE_POINT))


def tool_config(tools: Sequence[ToolDefinition], choice: str | dict[str, Any]) -> dict[str, Any]:
    """``toolConfig``: the tools' specs and the choice (``auto`` is Converse's default and is
    left out: models without ``toolChoice`` support accept the request then)."""
    specs = []
    for tool in tools:
        spec: dict[str, Any] = {"name": tool.name, "inputSchema": {"json": tool.parameters}}
        if tool.description:
            spec["description"] = tool.description
        specs.append({"toolSpec": spec})
    config: dict[str, Any] = {"tools": specs}
    if choice == "required":
        config["toolChoice"] = {"any": {}}
    elif isinstance(choice, dict):
        inner = choice.get("function")
        name = (inner if isinstance(inner, dict) else choice).get("name")
        if isinstance(name, str) and name:
            config["toolChoice"] = {"tool": {"name": name}}
    return config


def _filled(text: str | None) -> bool:
    return bool(text and text.strip())


class _Turns:
    """Converse turns built message by message: alternating roles, tool results paired."""

    def __init__(self, tools_on: bool, model: str) -> None:
        self.tools_on = tools_on
        self.model = model
        self.turns: list[dict[str, Any]] = []
        #: ids of the last assistant turn's ``toolUse`` blocks not answered yet, in order.
        self.open_calls: list[str] = []

    def add(self, message: Message) -> None:
        if message.role == "assistant":
            self._close_calls()
            self._append("assistant", self._assistant(message))
        elif message.role == "tool":
            call_id = message.tool_call_id or ""
            if self.tools_on and call_id in self.open_calls:
                self.open_calls.remove(call_id)
                self._append("user", [self._result(call_id, message)])
            else:  # no call of that id to answer (or no tools in this request): as text
                name = message.name or "a tool"
                text = f"[Result of {name}: {message.content or NO_OUTPUT}]"
                self._append("user", [{"text": text}, *self._images(message)])
        else:
            self._close_calls()
            blocks = [{"text": message.content}] if _filled(message.content) else []
            self._append("user", blocks + self._images(message))

    def finish(self) -> list[dict[str, Any]]:
        self._close_calls()
        if not self.turns or self.turns[0]["role"] != "user":
            self.turns.insert(0, {"role": "user", "content": [{"text": CONTINUED}]})
        for turn in self.turns:
            if not turn["content"]:
                turn["content"].append({"text": EMPTY})
        return self.turns

    def _append(self, role: str, blocks: list[dict[str, Any]]) -> None:
        if self.turns and self.turns[-1]["role"] == role:
            previous = self.turns[-1]["content"]
            # Tool results lead a user turn (Anthropic's models want them first).
            if blocks and "toolResult" in blocks[0]:
                results = sum(1 for block in previous if "toolResult" in block)
                previous[results:results] = blocks
            else:
                previous.extend(blocks)
        else:
            self.turns.append({"role": role, "content": blocks})

    def _close_calls(self) -> None:
        """Answer the calls the conversation left unanswered (Converse refuses a ``toolUse``
        without its ``toolResult`` in the next turn)."""
        if self.open_calls:
            blocks = [
                {"toolResult": {"toolUseId": call_id, "content": [{"text": NO_RESULT}]}}
                for call_id in self.open_calls
            ]
            self.open_calls = []
            self._append("user", blocks)

    def _assistant(self, message: Message) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = []
        for thought in message.thinking_blocks or ():
            if thought.provider != PROVIDER:
                continue  # another provider's signature means nothing here
            if thought.data is not None:
                blocks.append({"reasoningContent": {"redactedContent": thought.data}})
            else:
                reasoning: dict[str, Any] = {"text": thought.text}
                if thought.signature is not None:
                    reasoning["signature"] = thought.signature
                blocks.append({"reasoningContent": {"reasoningText": reasoning}})
        if _filled(message.content):
            blocks.append({"text": message.content})
        for call in message.tool_calls or ():
            name, arguments = call.function.name, call.function.arguments
            if self.tools_on and call.id not in self.open_calls:
                blocks.append(
                    {"toolUse": {"toolUseId": call.id, "name": name, "input": _input(arguments)}}
                )
                self.open_calls.append(call.id)
            else:
                blocks.append({"text": f"[Called {name} with arguments {arguments or '{}'}]"})
        return blocks

    def _result(self, call_id: str, message: Message) -> dict[str, Any]:
        content: list[dict[str, Any]] = [
            {"text": message.content if _filled(message.content) else NO_OUTPUT}
        ]
        content += self._images(message)
        return {"toolResult": {"toolUseId": call_id, "content": content}}

    def _images(self, message: Message) -> list[dict[str, Any]]:
        sources = [message.base64_image] if message.base64_image else []
        sources += [image.url for image in message.images or ()]
        return [
            remote_note(s) if is_remote(s) else image_block(s, model=self.model) for s in sources
        ]


def _input(arguments: str) -> dict[str, Any]:
    """A call's arguments as the JSON object ``toolUse.input`` must be; arguments that were
    never one (the model wrote broken JSON, and was told so) are kept as text in one."""
    try:
        return parse_arguments(arguments)
    except ValueError:
        return {"arguments_text": arguments}


def encode(body: dict[str, Any]) -> bytes:
    """The body's bytes (ASCII: a lone surrogate from a tool's output cannot break encoding)."""
    return json.dumps(body, separators=(",", ":")).encode("ascii")
