"""Constrained tool calling: each turn the server must answer with one call of one offered tool,
its arguments valid for that tool's schema (``tool_calling = "constrained"``, or ``"auto"``
once native calls proved unusable). The answer is read back into an ordinary tool call, so
the agent, sessions and events see no difference. There is no free-text branch: a run ends
through ``terminate``. With ``constrained_steps = 2`` a turn is two requests, each simpler
for a very small model: the tool's name, then that tool's arguments.

How the server is asked is the wire's business (:class:`StructuredOutput`: a
``response_format``, vLLM's ``guided_json``, OpenAI's strict functions). The first contact
tries the endpoint's fields in turn and checks each answer, since a server may ignore a field
it does not know: the first whose answer matches is remembered (``Refusals.choose``); an
endpoint that refuses or ignores them all is remembered as refusing ``constrained`` and the
caller falls back to text tool calling, said in one log line.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from app.exceptions import ContextWindowExceededError, LLMBadRequestError, LLMError
from app.llm.call_schema import CallSchema, call_parts, call_schema, problems, read_json
from app.llm.model import Model, ModelParams, ModelResponse, ToolDefinition
from app.llm.refusals import Refusals
from app.llm.text_mode import PromptChecks, text_mode_messages
from app.llm.usage import Usage
from app.logger import logger
from app.prompt.constrained import (
    ARGUMENTS_NOTE,
    CHOICE_INTRO,
    CHOICE_NOTE,
    CONSTRAINED_INTRO,
    CONSTRAINED_LIST_HEADER,
    EXAMPLE_LINE,
    EXAMPLES,
    PLACEHOLDER_COPIED,
)
from app.schema import Message, ToolCall


class StructuredOutput(Protocol):
    """How one wire API asks for an answer matching a JSON schema."""

    def forms(self) -> Sequence[str]:
        """The request forms to try on an endpoint, best first (``"json_schema"``...)."""
        ...

    def answers_natively(self, form: str) -> bool:
        """Whether ``form`` answers with the API's own tool calls (else JSON text)."""
        ...

    def params(self, form: str, params: ModelParams, call: CallSchema) -> ModelParams:
        """The request's params asking for ``call`` by ``form``."""
        ...

    def refuses(self, form: str, error: LLMError) -> bool:
        """Whether ``error`` is the endpoint refusing ``form`` (not some other failure)."""
        ...


class ConstrainedCalls:
    """Constrained turns over ``inner`` (a model stack with retries), asked as
    ``structured`` says; what the endpoint honours is kept in ``refusals``."""

    def __init__(
        self,
        inner: Model,
        refusals: Refusals,
        structured: StructuredOutput,
        may_ask_plain: bool = True,
        steps: int = 1,
    ) -> None:
        self.inner = inner
        self.steps = steps
        self.name = inner.name
        self.refusals = refusals
        self.structured = structured
        self.checks = PromptChecks(refusals, inner.name, may_ask_plain)
        self._schema: tuple[Sequence[ToolDefinition], Any, CallSchema] | None = None

    def schema(self, tools: Sequence[ToolDefinition], tool_choice: Any) -> CallSchema:
        """The call schema of these tools, built once while they stay the same."""
        cached = self._schema
        if (
            cached is not None
            and cached[1] == tool_choice
            and (cached[0] is tools or cached[0] == tools)
        ):
            return cached[2]
        call = call_schema(tools, tool_choice)
        self._schema = (tools, tool_choice, call)
        return call

    @property
    def available(self) -> bool:
        return "constrained" not in self.refusals.features

    async def request(
        self, messages: Sequence[Message], params: ModelParams
    ) -> ModelResponse | None:
        """One constrained turn; None when the endpoint honours no form (now remembered: the
        caller asks in text mode)."""
        tools = offered(params.tools, messages)
        if STYLE.relevant_last:
            tools = relevance_order(tools, messages)
        try:
            call = self.schema(tools, params.tool_choice)
        except ValueError as e:  # no tool a grammar can name (or tool_choice names none)
            logger.warning(f"Model '{self.name}': no constrained call possible ({e})")
            return None
        known = self.refusals.choice("constrained")
        forms = [known] if known else list(self.structured.forms())
        tried: list[str] = []
        for form in forms:
            try:
                response, valid = await self._turn(form, messages, params, tools, call)
            except LLMBadRequestError as e:
                if isinstance(e, ContextWindowExceededError) or not self.structured.refuses(
                    form, e
                ):
                    raise
                if known:  # the server changed since it was learned: learn it again
                    await self.refusals.choose("constrained", None)
                    return await self.request(messages, params)
                tried.append(f"{form} refused: {_short(e.message)}")
                continue
            if valid is not None:
                if not known:
                    await self.refusals.choose("constrained", form)
                    logger.info(
                        f"Model '{self.name}' ({self.refusals.base_url}) answers constrained "
                        f"tool calls through {form}; remembered for this endpoint"
                    )
                if self._in_two_steps(form):
                    return valid
                return await self._not_copied(valid, form, messages, params, tools, call)
            if known or response.truncated:  # the model's mistake, or cut: not the field's
                return response
            tried.append(f"{form} ignored: the answer did not match the schema")
        await self.refusals.refuse("constrained", "; ".join(tried), say=False)
        logger.warning(
            f"Model '{self.name}' ({self.refusals.base_url}) does not constrain its answers "
            f"to a schema ({'; '.join(tried)}): tool calls are read from its text instead "
            '(tool_calling = "text"); remembered for this endpoint'
        )
        return None

    def _in_two_steps(self, form: str) -> bool:
        """Whether turns by ``form`` ask for the tool's name, then for its arguments."""
        return self.steps == 2 and not self.structured.answers_natively(form)

    async def _turn(
        self,
        form: str,
        messages: Sequence[Message],
        params: ModelParams,
        tools: Sequence[ToolDefinition],
        call: CallSchema,
    ) -> tuple[ModelResponse, ModelResponse | None]:
        """One turn by ``form``: the answer to return when it does not match (its call when one
        can be read), and the answer with its valid call (None when it does not match)."""
        if self._in_two_steps(form):
            return await self._two_steps(form, messages, params, tools, call)
        response = await self._ask(form, messages, params, tools, call)
        return self._best_effort(form, response, call), self._read(form, response, call)

    async def _two_steps(
        self,
        form: str,
        messages: Sequence[Message],
        params: ModelParams,
        tools: Sequence[ToolDefinition],
        call: CallSchema,
    ) -> tuple[ModelResponse, ModelResponse | None]:
        """The turn as two constrained requests: the tool's name alone (skipped when one tool
        is offered), then that tool's arguments alone. Both send the same conversation and
        system prompt (the server's prompt cache serves the second); what each asks for is a
        note at the end, the user's request repeated there, nearest the answer."""
        request = _short(next((m.content or "" for m in messages if m.role == "user"), ""), 600)
        prompt = choice_prompt(tools, call)
        usage = Usage()
        names = call.names
        if len(names) == 1:
            name = names[0]
        else:
            pick = CallSchema(name_schema(names), call.arguments)
            note = CHOICE_NOTE.format(request=request)
            chosen = await self._send(form, messages, params, pick, prompt, note)
            usage = usage + chosen.usage
            value = read_json(chosen.message.content)
            picked = value.get("name") if isinstance(value, dict) else None
            if not isinstance(picked, str) or picked not in call.arguments:
                return chosen, None
            name = picked
        tool = next(t for t in tools if t.name == name)
        schema = call.arguments[name]
        fill = CallSchema(schema, {name: schema})
        shown = example_for(tool.name, schema)
        placeholders = _placeholders(shown)
        made: ModelResponse | None = None
        # Told a placeholder was copied, the arguments are asked again without the example;
        # a call that still copies one is a call of no tool, never run.
        for example, extra in ((shown, None), (None, PLACEHOLDER_COPIED)):
            note = arguments_note(tool, schema, request, example)
            if extra:
                note += "\n" + extra
            filled = await self._send(form, messages, params, fill, prompt, note)
            usage = usage + filled.usage
            filled = dataclasses.replace(filled, usage=usage)
            arguments = read_json(filled.message.content)
            if arguments is None:
                return filled, None
            made = _with_call(filled, name, arguments)
            if not _copied(made, placeholders):
                return made, None if problems(arguments, schema) else made
        assert made is not None
        return made, _nameless(made, _copied(made, placeholders), self.name)

    async def _send(
        self,
        form: str,
        messages: Sequence[Message],
        params: ModelParams,
        call: CallSchema,
        prompt: str,
        note: str | None,
    ) -> ModelResponse:
        """One request by a text-answering ``form`` with ``prompt`` as the tool prompt."""
        asked = self.structured.params(form, params, call)
        # The answer is the call's JSON, not text for whoever watches the turn.
        asked = dataclasses.replace(asked, on_delta=None)
        tools = params.tools
        checks = self.checks
        sent = _rewritten(messages, tools, prompt, note, checks.fold)
        if checks.fold or checks.system_judged:
            return await self.inner.request(sent, asked)
        response = await self.inner.request(sent, checks.plain_until(False, asked, at_once=True))
        if not await checks.system_dropped(response, sent):
            return response
        sent = _rewritten(messages, tools, prompt, note, fold=True)
        return await self.inner.request(sent, asked)

    async def _ask(
        self,
        form: str,
        messages: Sequence[Message],
        params: ModelParams,
        tools: Sequence[ToolDefinition],
        call: CallSchema,
        style: PromptStyle | None = None,
        note: str | None = None,
    ) -> ModelResponse:
        if not self.structured.answers_natively(form):
            prompt = constrained_prompt(tools, call, style).text
            return await self._send(form, messages, params, call, prompt, note)
        return await self.inner.request(messages, self.structured.params(form, params, call))

    async def _not_copied(
        self,
        response: ModelResponse,
        form: str,
        messages: Sequence[Message],
        params: ModelParams,
        tools: Sequence[ToolDefinition],
        call: CallSchema,
    ) -> ModelResponse:
        """``response``, unless its call copied an example's placeholder (``<file name>``):
        then the turn is asked again, saying so (then also without the examples); a call that
        still copies one is answered as a call of no tool (the agent tells the model which
        tools there are), never run."""
        if self.structured.answers_natively(form):
            return response
        shown = constrained_prompt(tools, call).placeholders
        copied = _copied(response, shown)
        if not copied:
            return response
        for examples in (True, False):  # told so; then without the examples
            style = dataclasses.replace(STYLE, examples=examples)
            asked = await self._ask(form, messages, params, tools, call, style, PLACEHOLDER_COPIED)
            again = self._read(form, asked, call)
            if again is not None and not _copied(again, shown):
                return again
        return _nameless(response, copied, self.name)

    def _read(self, form: str, response: ModelResponse, call: CallSchema) -> ModelResponse | None:
        """The response with its call, when the answer is exactly valid calls; else None."""
        if self.structured.answers_natively(form):
            calls = response.message.tool_calls or []
            for tool_call in calls:
                try:
                    arguments = json.loads(tool_call.function.arguments or "{}")
                except ValueError:
                    return None
                parts = call_parts(
                    {"name": tool_call.function.name, "arguments": arguments}, call.names
                )
                if parts is None or problems(parts[1], call.arguments[parts[0]]):
                    return None
            return response if calls else None
        parts = call_parts(read_json(response.message.content), call.names)
        if parts is None or problems(parts[1], call.arguments[parts[0]]):
            return None
        return _with_call(response, *parts)

    def _best_effort(self, form: str, response: ModelResponse, call: CallSchema) -> ModelResponse:
        """An answer that does not match: its call when one can be read (the agent tells the
        model what is wrong with the arguments), else the answer as it is."""
        if self.structured.answers_natively(form):
            return response
        parts = call_parts(read_json(response.message.content), call.names)
        return response if parts is None else _with_call(response, *parts)


def _rewritten(
    messages: Sequence[Message],
    tools: Sequence[ToolDefinition],
    prompt: str,
    note: str | None,
    fold: bool,
) -> list[Message]:
    """The conversation as a constrained turn sends it: the tool prompt in the system prompt
    (or the first user message, ``fold``), calls as their JSON, results as user messages,
    ``note`` at the end."""
    out = text_mode_messages(messages, tools, None, prompt=prompt, bare=True, fold=fold)
    if note:
        last = out[-1] if out else None
        if last is not None and last.role == "user":
            out[-1] = last.model_copy(update={"content": f"{last.content or ''}\n\n{note}"})
        else:
            out.append(Message.user_message(note))
    return out


#: The argument of a call of no tool that stands for a call which copied an example's
#: placeholders (:func:`copied_placeholders` reads it).
COPIED_EXAMPLE = "copied_example"


def copied_placeholders(tool_call: ToolCall) -> list[str] | None:
    """The placeholders a caught call copied when ``tool_call`` stands for one (a call of no
    tool, never run: the model's call was valid for its schema but sent an example's
    placeholders as values twice); else None. Benchmarks count these apart from invalid
    calls: the schema was kept, the model's judgement was not."""
    if tool_call.function.name:
        return None
    try:
        arguments = json.loads(tool_call.function.arguments or "{}")
    except ValueError:
        return None
    copied = arguments.get(COPIED_EXAMPLE) if isinstance(arguments, dict) else None
    if not isinstance(copied, list) or not all(isinstance(c, str) for c in copied):
        return None
    return copied


def _nameless(response: ModelResponse, copied: set[str], model: str) -> ModelResponse:
    """``response`` as a call of no tool (the agent tells the model which tools there are):
    its call sent an example's placeholders as values twice."""
    logger.warning(
        f"Model '{model}' sent the example placeholders {sorted(copied)} as values "
        "twice; the call is not run"
    )
    nameless = ToolCall.function_call("", {COPIED_EXAMPLE: sorted(copied)})
    return dataclasses.replace(response, message=Message(role="assistant", tool_calls=[nameless]))


def _with_call(response: ModelResponse, name: str, arguments: dict[str, Any]) -> ModelResponse:
    tool_call = ToolCall.function_call(name, json.dumps(arguments, ensure_ascii=False))
    message = Message(role="assistant", content=None, tool_calls=[tool_call])
    return ModelResponse(
        message=message,
        usage=response.usage,
        finish_reason="tool_calls",
        reasoning=response.reasoning,
    )


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def example_arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """Arguments of a reduced schema (:mod:`app.llm.call_schema`): its required properties,
    each an enum's first value, a placeholder naming a string (``<file name>``) or a short
    value of its type."""
    value = _example(schema, 0)
    return value if isinstance(value, dict) else {}


def _example(schema: dict[str, Any], depth: int) -> Any:
    if "anyOf" in schema:
        return _example(schema["anyOf"][0], depth + 1)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) else kind
    if kind == "object":
        props = schema.get("properties", {})
        if depth > 3:
            return {}
        return {
            name: f"<{name.replace('_', ' ')}>"
            if props[name].get("type") == "string"
            else _example(props[name], depth + 1)
            for name in schema.get("required", ())
        }
    return {"string": "<text>", "integer": 1, "number": 1, "boolean": False, "array": []}.get(
        str(kind), None
    )


@dataclass(frozen=True, slots=True)
class PromptStyle:
    """How constrained turns are prompted (the defaults are what measured best:
    docs/local-models.md). ``brief``: each description's first sentence only; ``examples``:
    one example call per tool; ``relevant_last``: tools ordered by the words they share with
    the user's request, the closest last (nearest the answer); ``finish_first``: whether the
    first turn of a conversation may already call a finishing tool (``terminate``)."""

    brief: bool = True
    examples: bool = True
    relevant_last: bool = True
    finish_first: bool = False


#: The style constrained turns use.
STYLE = PromptStyle()
#: Tools that end a run (upstream's name): not offered before any tool ran, unless the style
#: says so or nothing else is offered.
FINISHING = frozenset({"terminate"})
_WORD = re.compile(r"[a-z]{3,}")


def offered(
    tools: Sequence[ToolDefinition],
    messages: Sequence[Message],
    style: PromptStyle | None = None,
) -> Sequence[ToolDefinition]:
    """The tools a constrained turn may call: all, except finishing ones on a conversation's
    first turn (nothing was done yet: a small model's most common mistake is to end there)."""
    if (style or STYLE).finish_first or any(m.role == "tool" for m in messages):
        return tools
    kept = [tool for tool in tools if tool.name not in FINISHING]
    return kept or tools


def relevance_order(
    tools: Sequence[ToolDefinition], messages: Sequence[Message]
) -> list[ToolDefinition]:
    """``tools`` by how many words of the user's request (the first user message) their name
    and description share, fewest first: a small model leans to what it read last."""
    request = next((m.content or "" for m in messages if m.role == "user"), "")
    wanted = set(_WORD.findall(request.lower()))

    def score(tool: ToolDefinition) -> int:
        text = f"{tool.name.replace('_', ' ')} {tool.description}".lower()
        return len(wanted & set(_WORD.findall(text)))

    return sorted(tools, key=score)  # stable: ties keep the agent's order


@dataclass(frozen=True, slots=True)
class ConstrainedPrompt:
    """The constrained turn's tool prompt, and the placeholders its examples show (values
    such as ``<file name>`` a model must not send as they are)."""

    text: str
    placeholders: frozenset[str]


_PLACEHOLDER = re.compile(r"<[^<>\n]{1,60}>")


def constrained_prompt(
    tools: Sequence[ToolDefinition], call: CallSchema, style: PromptStyle | None = None
) -> ConstrainedPrompt:
    """The text appended to the system prompt: the answer's form, then each callable tool with
    its arguments and (by ``style``) one example call."""
    from app.llm.text_tools import render_tool  # ~50 ms: on use

    style = style or STYLE
    blocks = []
    shown: set[str] = set()
    for tool in tools:
        schema = call.arguments.get(tool.name)
        if schema is None:
            continue
        block = render_tool(tool.to_param(), brief=style.brief)
        if style.examples:
            example = EXAMPLES.get(tool.name)
            if example is None or problems(example, schema):
                example = example_arguments(schema)
            shown |= {
                _key(v)
                for v in example.values()
                if isinstance(v, str) and _PLACEHOLDER.fullmatch(v)
            }
            line = json.dumps({"name": tool.name, "arguments": example}, ensure_ascii=False)
            block += "\n" + EXAMPLE_LINE.format(call=line)
        blocks.append(block)
    text = f"{CONSTRAINED_INTRO}\n\n{CONSTRAINED_LIST_HEADER}\n" + "\n".join(blocks)
    return ConstrainedPrompt(text, frozenset(shown))


def name_schema(names: Sequence[str]) -> dict[str, Any]:
    """The schema of the first of two steps: ``{"name": <one of names>}``."""
    return {
        "type": "object",
        "properties": {"name": {"enum": list(names)}},
        "required": ["name"],
    }


def choice_prompt(tools: Sequence[ToolDefinition], call: CallSchema) -> str:
    """The tool prompt of the first of two steps: each callable tool's first sentence."""
    from app.llm.text_tools import render_tool  # ~50 ms: on use

    lines = []
    for tool in tools:
        if tool.name in call.arguments:
            line = render_tool({"name": tool.name, "description": tool.description}, brief=True)
            lines.append(line.splitlines()[0])
            if STYLE.examples:
                example = json.dumps({"name": tool.name}, ensure_ascii=False)
                lines.append(EXAMPLE_LINE.format(call=example))
    return f"{CHOICE_INTRO}\n" + "\n".join(lines)


def example_for(name: str, schema: dict[str, Any]) -> dict[str, Any] | None:
    """The example arguments shown for tool ``name`` (None when the style shows none): the
    framework's own (:data:`EXAMPLES`) when valid for ``schema``, else made from it."""
    if not STYLE.examples:
        return None
    example = EXAMPLES.get(name)
    if example is None or problems(example, schema):
        example = example_arguments(schema)
    return example


def _placeholders(example: dict[str, Any] | None) -> frozenset[str]:
    """The placeholder values (``<file name>``) an example shows, as compared."""
    return frozenset(
        _key(v)
        for v in (example or {}).values()
        if isinstance(v, str) and _PLACEHOLDER.fullmatch(v)
    )


def arguments_note(
    tool: ToolDefinition,
    schema: dict[str, Any],
    request: str,
    example: dict[str, Any] | None = None,
) -> str:
    """What the second of two steps asks: the chosen tool's arguments, in the order the
    schema has them, an ``example`` of them, then the user's request."""
    from app.llm.text_tools import render_tool  # ~50 ms: on use

    parameters = tool.parameters if isinstance(tool.parameters, dict) else {}
    given = parameters.get("properties")
    given = given if isinstance(given, dict) else {}
    order = list(schema.get("properties", {}))
    properties = {k: given[k] for k in order if k in given}
    properties |= {k: v for k, v in given.items() if k not in properties}
    param = {
        "name": tool.name,
        "description": tool.description,
        "parameters": {**parameters, "properties": properties},
    }
    text = render_tool(param, brief=True)
    first, _, rest = text.partition("\n")
    if example is not None:
        rest += "\n" + EXAMPLE_LINE.format(call=json.dumps(example, ensure_ascii=False)).strip()
    return ARGUMENTS_NOTE.format(
        tool=first.removeprefix("- "), arguments=rest, name=tool.name, request=request
    )


def _key(text: str) -> str:
    """A placeholder as compared: case and spacing do not make it a value."""
    return " ".join(text.split()).casefold()


def _copied(response: ModelResponse, shown: frozenset[str]) -> set[str]:
    """The placeholders ``response``'s calls send as values."""
    found: set[str] = set()
    for tool_call in response.message.tool_calls or ():
        try:
            arguments = json.loads(tool_call.function.arguments or "{}")
        except ValueError:
            continue
        if isinstance(arguments, dict):
            found |= {v for v in arguments.values() if isinstance(v, str) and _key(v) in shown}
    return found


__all__ = [
    "COPIED_EXAMPLE",
    "ConstrainedCalls",
    "StructuredOutput",
    "constrained_prompt",
    "copied_placeholders",
    "example_arguments",
    "name_schema",
]
