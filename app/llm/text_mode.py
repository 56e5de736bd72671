"""``TextToolCalls``: the wrapper that decides, turn by turn, how a profile's model calls tools:
natively (the API's ``tools``), in text (the tools described in the prompt, the calls parsed
from the answer) or constrained (the server made to answer with one valid JSON call:
``app.llm.constrained``), as ``tool_calling`` says and the endpoint has shown.

``"auto"`` starts native. It turns to text when the endpoint itself refused tools (an HTTP
error; the model's prose never marks it), or to constrained tool calling when native calls
proved unusable: the server left the tools out of the prompt (it counted a prompt far smaller
than the tools alone), or the calls kept failing their tools' schemas. Text mode's tool
results travel as user messages (some chat templates reject the ``tool`` role; runs are
merged, since templates also want roles to alternate); the agent sees the same ``Message``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from app.exceptions import ToolsNotSupportedError
from app.llm.arguments import loads_safely
from app.llm.call_schema import call_parts, problems
from app.llm.model import Model, ModelParams, ModelResponse, ToolDefinition
from app.llm.refusals import Refusals
from app.logger import logger
from app.prompt.text_tools import EXAMPLE_NAMES, TOOL_CHOICE_REQUIRED, TOOL_CHOICE_SPECIFIC
from app.schema import Function, Message

if TYPE_CHECKING:
    from app.llm.constrained import ConstrainedCalls

#: Native turns in a row whose calls fail their tools' schemas before ``"auto"`` turns to
#: constrained tool calling.
FAILING_TURNS = 2
#: Native turns with valid calls after which they are no longer checked (their cost is then
#: saved: the endpoint's native calls work).
TRUSTED_TURNS = 3
#: A server prompt below this share of the tools' own estimated tokens left the tools out.
DROPPED_SHARE = 0.35
#: Tools smaller than this (estimated tokens) are too small to tell a dropped tool list by.
DROPPED_MIN_TOKENS = 256


class PromptChecks:
    """What the server's prompt counts show about one endpoint: a tool list or a system prompt
    its chat template leaves out. Judged on the first turn of each kind that reports usage.
    A native turn is streamed as the profile says, and only after a streamed turn came back
    without usage (llama-cpp-python counts nothing in a stream) is the next one asked plainly,
    so endpoints that count in streams (OpenAI, vLLM, Ollama) keep streaming their first
    turn. ``stream = true`` in the profile is never overridden. A dropped system prompt is
    remembered (``refusals``: ``"system"``) and folded into the first user message from then
    on."""

    def __init__(self, refusals: Refusals, name: str, may_ask_plain: bool = True) -> None:
        self.refusals = refusals
        self.name = name
        self.may_ask_plain = may_ask_plain
        self.tools_judged = False
        self.system_judged = False
        self.uncounted = False  # a turn came back without usage: the next is asked plainly

    @property
    def fold(self) -> bool:
        """Whether the system prompt goes into the first user message."""
        return "system" in self.refusals.features

    def plain_until(
        self, judged: bool, params: ModelParams, *, at_once: bool = False
    ) -> ModelParams:
        """``params`` asking for a plain answer (one with usage) until ``judged``: at once
        (``at_once``: turns nobody watches), else after a turn that reported no usage."""
        if judged or params.stream is not None or not self.may_ask_plain:
            return params
        if not (at_once or self.uncounted):
            return params
        return dataclasses.replace(params, stream=False)

    def tools_dropped(self, response: ModelResponse, tools: int, needed: int) -> str | None:
        """Why ``response`` shows the ``tools`` (about ``needed`` tokens) left out of the
        prompt; None when it does not, or cannot tell (no usage)."""
        usage = response.usage
        if response.message.tool_calls:  # native calls: the server plainly saw the tools
            self.tools_judged = True
            return None
        if usage.prompt_tokens <= 0 or usage.estimated:
            self.uncounted = True
            return None
        self.tools_judged = True
        if needed < DROPPED_MIN_TOKENS or usage.prompt_tokens >= DROPPED_SHARE * needed:
            return None
        return (
            f"the server counted a {usage.prompt_tokens}-token prompt, and the {tools} tools "
            f"alone take about {needed}: it left them out of the prompt (a chat template "
            "without tools)"
        )

    async def system_dropped(self, response: ModelResponse, sent: Sequence[Message]) -> bool:
        """Whether ``response`` shows the system prompt of ``sent`` left out (remembered)."""
        usage = response.usage
        if self.system_judged:
            return False
        if usage.prompt_tokens <= 0 or usage.estimated:
            self.uncounted = True
            return False
        self.system_judged = True
        system = next((m.content or "" for m in sent if m.role == "system"), "")
        needed = len(system) // 4
        if needed < DROPPED_MIN_TOKENS or usage.prompt_tokens >= DROPPED_SHARE * needed:
            return False
        why = (
            f"the server counted a {usage.prompt_tokens}-token prompt for a system prompt of "
            f"about {needed} tokens: its chat template leaves system messages out"
        )
        await self.refusals.refuse("system", why, say=False)
        logger.warning(
            f"Model '{self.name}' ({self.refusals.base_url}): {why}; the system prompt goes "
            "into the first user message from now on (remembered for this endpoint)"
        )
        return True


class TextToolCalls:
    """Wraps ``inner``: each turn native, in text or constrained, as ``mode`` (the profile's
    ``tool_calling``) and what the endpoint showed (``refusals``) say. ``constrained`` makes
    the constrained turns over the same ``inner`` (None: the API has no constrained decoding,
    and such turns are asked in text)."""

    def __init__(
        self,
        inner: Model,
        refusals: Refusals,
        mode: str = "auto",
        constrained: ConstrainedCalls | None = None,
    ) -> None:
        self.inner = inner
        self.name = inner.name
        self.refusals = refusals
        self.mode = mode
        self.constrained = constrained
        self.checks = constrained.checks if constrained is not None else None
        self._warned: set[str] = set()
        self._failing = 0  # native turns in a row whose calls failed their schemas
        self._trusted = 0  # native turns with valid calls
        self._tools_tokens: tuple[Sequence[ToolDefinition], int] | None = None

    def turn_mode(self) -> str:
        """How the next turn with tools is asked: ``"native"``, ``"text"`` or
        ``"constrained"``."""
        mode = self.mode
        if mode == "native" or mode == "text":
            return mode
        features = self.refusals.features
        if mode == "auto" and not features:
            return "native"
        constrained = self.constrained is not None and "constrained" not in features
        if mode == "constrained":
            if self.constrained is None:
                self._warn_once(
                    "no-constraint",
                    f"Model '{self.name}': this API has no constrained decoding; tool calls "
                    'are read from text instead (tool_calling = "text")',
                )
            return "constrained" if constrained else "text"
        if "tools" in features:  # refused by the endpoint: constrained only where known to work
            known = constrained and self.refusals.choice("constrained") is not None
            return "constrained" if known else "text"
        if "native_calls" in features:
            return "constrained" if constrained else "text"
        return "native"

    @property
    def text_mode(self) -> bool:
        return self.turn_mode() == "text"

    async def request(self, messages: Sequence[Message], params: ModelParams) -> ModelResponse:
        if not params.tools:
            return await self.inner.request(messages, params)
        mode = self.turn_mode()
        if mode == "text":
            return await self._in_prompt(messages, params)
        if mode == "constrained":
            return await self._constrained(messages, params)
        checks = self.checks
        asked = params
        if checks is not None and params.tool_choice != "none":
            needed = self._tools_estimate(params.tools)
            asked = checks.plain_until(checks.tools_judged or needed < DROPPED_MIN_TOKENS, params)
        try:
            response = await self.inner.request(messages, asked)
        except ToolsNotSupportedError as e:
            if self.mode != "auto":
                raise
            await self.refusals.refuse("tools", e.message)
            return await self._unusable(messages, params)
        if params.tool_choice == "none":
            return response
        if checks is not None and self._trusted < TRUSTED_TURNS:
            if await self._judged_unusable(response, params) and not response.message.tool_calls:
                return await self._unusable(messages, params)
        if response.message.content:
            self._note_prose_calls(response, params.tools)
        return response

    async def _unusable(self, messages: Sequence[Message], params: ModelParams) -> ModelResponse:
        """The turn asked again now that native calls are out (constrained or text)."""
        if self.turn_mode() == "constrained":
            return await self._constrained(messages, params)
        return await self._in_prompt(messages, params)

    async def _constrained(self, messages: Sequence[Message], params: ModelParams) -> ModelResponse:
        assert self.constrained is not None
        if params.tool_choice == "none":
            return await self.inner.request(messages, dataclasses.replace(params, tools=()))
        response = await self.constrained.request(messages, params)
        if response is None:  # the endpoint honours no constraint (remembered): text mode
            return await self._in_prompt(messages, params)
        return response

    async def _in_prompt(self, messages: Sequence[Message], params: ModelParams) -> ModelResponse:
        plain = dataclasses.replace(params, tools=(), tool_choice="auto")
        if params.tool_choice == "none":
            return await self.inner.request(messages, plain)
        checks = self.checks
        fold = checks is not None and checks.fold
        rewritten = text_mode_messages(messages, params.tools, params.tool_choice, fold=fold)
        if checks is None or fold:
            response = await self.inner.request(rewritten, plain)
        else:
            asked = checks.plain_until(checks.system_judged, plain)
            response = await self.inner.request(rewritten, asked)
            if await checks.system_dropped(response, rewritten):
                rewritten = text_mode_messages(
                    messages, params.tools, params.tool_choice, fold=True
                )
                response = await self.inner.request(rewritten, plain)
        return text_mode_response(response, [tool.name for tool in params.tools])

    async def _judged_unusable(self, response: ModelResponse, params: ModelParams) -> bool:
        """Whether this native turn shows native calls unusable (remembered under ``"auto"``):
        the server counted a prompt far smaller than the tools alone (it left them out), or
        the calls failed their schemas for ``FAILING_TURNS`` turns in a row."""
        assert self.checks is not None
        if not self.checks.tools_judged:
            needed = self._tools_estimate(params.tools)
            why = self.checks.tools_dropped(response, len(params.tools), needed)
            if why is not None:
                return await self._give_up_native(why)
        calls = response.message.tool_calls
        if not calls:
            return False
        if self._calls_valid(calls, params):
            self._failing = 0
            self._trusted += 1
            return False
        self._failing += 1
        if self._failing < FAILING_TURNS:
            return False
        return await self._give_up_native(
            f"its native tool calls failed their tools' schemas {self._failing} turns in a row"
        )

    async def _give_up_native(self, why: str) -> bool:
        if self.mode != "auto":
            self._warn_once(
                "native",
                f"Model '{self.name}' ({self.refusals.base_url}): {why}. Set tool_calling = "
                '"constrained" (or "text") in its [llm] section.',
            )
            return False
        await self.refusals.refuse("native_calls", why, say=False)
        then = "constrained tool calling" if self.turn_mode() == "constrained" else "text"
        logger.warning(
            f"Model '{self.name}' ({self.refusals.base_url}): {why}; switching to {then} "
            "(remembered for this endpoint)"
        )
        return True

    def _calls_valid(self, calls: Sequence[Any], params: ModelParams) -> bool:
        assert self.constrained is not None
        try:
            call = self.constrained.schema(params.tools, "auto")
        except ValueError:
            return True  # no tool a schema can describe: nothing to judge by
        for tool_call in calls:
            try:
                arguments = loads_safely(tool_call.function.arguments or "{}")
            except ValueError:
                return False
            name = tool_call.function.name
            if name not in call.arguments:
                # A tool whose name no grammar holds is not judged; nor is a call of a tool
                # that does not exist: the agent answers it with the tools there are, and a
                # strong model's slip must not turn a whole endpoint constrained.
                continue
            parts = call_parts({"name": name, "arguments": arguments}, call.names)
            if parts is None:
                return False
            if problems(parts[1], call.arguments[parts[0]]):
                return False
        return True

    def _tools_estimate(self, tools: Sequence[ToolDefinition]) -> int:
        """The tools' size in tokens, roughly (four characters a token), once per tool list."""
        cached = self._tools_tokens
        if cached is not None and cached[0] is tools:
            return cached[1]
        size = sum(len(json.dumps(tool.to_param(), ensure_ascii=False)) for tool in tools) // 4
        self._tools_tokens = (tools, size)
        return size

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            logger.warning(message)

    def _note_prose_calls(self, response: ModelResponse, tools: Sequence[ToolDefinition]) -> None:
        """A native turn answered with a call in its text: never run nor remembered; warned
        once (a server that drops the tools needs ``tool_calling = "text"``)."""
        if "prose" in self._warned:
            return
        names = [tool.name for tool in tools]
        if text_mode_response(response, names) is not response:
            self._warn_once(
                "prose",
                f"Model '{self.name}' wrote what looks like a tool call in its text instead "
                "of using the API's tool calls; it was not run. If the server leaves the tools "
                'out of the prompt (a model\'s own chat template), set tool_calling = "text" '
                "in its [llm] section.",
            )


def text_mode_messages(
    messages: Sequence[Message | dict[str, Any]],
    tools: Sequence[ToolDefinition],
    tool_choice: Any,
    *,
    prompt: str | None = None,
    bare: bool = False,
    fold: bool = False,
) -> list[Message]:
    """The messages rewritten for text mode (new list); a result without its call is dropped.
    ``prompt`` replaces the text mode's tool prompt; ``bare`` shows earlier calls as the bare
    JSON a constrained answer is, not in ``<tool_call>`` blocks; ``fold`` puts the system
    prompt at the start of the first user message (for a template without a system role)."""
    from app.llm.text_tools import render_tool_prompt, render_tool_result  # ~50 ms: on use

    if prompt is None:
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
            out.append(_assistant_text(message, names, bare))
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
    if fold:
        system_text = "\n\n".join(m.content or "" for m in out if m.role == "system")
        out = [m for m in out if m.role != "system"]
        first = next((i for i, m in enumerate(out) if m.role == "user"), None)
        if first is None:
            out.insert(0, Message.user_message(system_text))
        else:
            user = out[first]
            text = f"{system_text}\n\n{user.content or ''}"
            out[first] = user.model_copy(update={"content": text})
    return out


def _assistant_text(message: Message, names: dict[str, str], bare: bool = False) -> Message:
    blocks = []
    for call in message.tool_calls or ():
        names[call.id] = call.function.name
        try:
            arguments = loads_safely(call.function.arguments or "{}")
        except ValueError:
            arguments = call.function.arguments
        block = json.dumps({"name": call.function.name, "arguments": arguments}, ensure_ascii=False)
        blocks.append(block if bare else f"<tool_call>{block}</tool_call>")
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
    """The calls written in the answer's text, made ``message.tool_calls``; a copy of the
    prompt's example call is made a call of no tool (answered as such, never run)."""
    from app.llm.text_tools import parse_tool_calls  # its regexes cost ~50 ms to import

    content = response.message.content or ""
    parsed = parse_tool_calls(content, names)
    if not parsed.calls:
        return response
    calls = parsed.calls
    if any(c.function.name in EXAMPLE_NAMES and c.function.name not in names for c in calls):
        logger.warning("The model wrote the prompt's example call as its own; it is not run")
        calls = [
            c.model_copy(update={"function": Function(name="", arguments=c.function.arguments)})
            if c.function.name in EXAMPLE_NAMES and c.function.name not in names
            else c
            for c in calls
        ]
    message = Message(role="assistant", content=parsed.content.strip() or None, tool_calls=calls)
    return ModelResponse(
        message=message,
        usage=response.usage,
        finish_reason="tool_calls",
        reasoning=response.reasoning,
    )
