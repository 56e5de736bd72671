"""What our MCP client answers when a server asks *it* something (docs/mcp.md): sampling
with the agent's own LLM (only servers with ``"sampling": true`` in ``mcp.json``; secrets
redacted from the answer), elicitation through ``ask_human``'s input provider (a form is shown
as its fields; a reply that does not fit its schema is asked again a few times), and the
workspace as the one ``file://`` root.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.exceptions import OpenManusError
from app.logger import logger, redact_registered
from app.sandbox.files import resolve_workspace
from app.schema import Message
from app.tool.ask_human import get_input_provider

if TYPE_CHECKING:  # the SDK costs half a second to import: only when a server asks
    from mcp.types import ElicitResult

#: JSON-RPC code for "the user (here: the configuration) rejected the request" (MCP spec).
SAMPLING_REFUSED = -1
_MAX_SAMPLING_MESSAGES = 200
_ELICITATION_ATTEMPTS = 3  # a reply that does not fit the form is asked again until then
_ELICITATION_TIMEOUT = 600.0  # seconds; then the question counts as dismissed


class MCPClientFeatures:
    """Sampling, elicitation and roots for every connection of one ``MCPClients``. None means:
    no ``llm``, sampling refused; ``ask_human``'s provider; the configured workspace."""

    def __init__(
        self,
        *,
        llm: Any = None,
        input_provider: Any = None,
        workspace: Path | None = None,
    ) -> None:
        self.llm = llm
        self.input_provider = input_provider
        self.workspace = workspace

    def root_path(self) -> Path:
        workspace = self.workspace if self.workspace is not None else resolve_workspace(None)
        return Path(workspace).resolve()

    async def list_roots(self, context: Any = None) -> Any:
        from mcp import types
        from pydantic import FileUrl

        path = self.root_path()
        return types.ListRootsResult(roots=[types.Root(uri=FileUrl(path.as_uri()), name=path.name)])

    async def sample(self, server_id: str, allowed: bool, params: Any) -> Any:
        """Answer ``sampling/createMessage`` with our LLM, or an error saying why not."""
        from mcp import types

        if not allowed:
            logger.warning(f"MCP server '{server_id}' asked for an LLM completion: refused")
            return types.ErrorData(
                code=SAMPLING_REFUSED,
                message=f"Sampling is not allowed for MCP server '{server_id}': this client "
                'answers sampling requests only for servers with "sampling": true in mcp.json.',
            )
        if self.llm is None:
            return types.ErrorData(
                code=SAMPLING_REFUSED,
                message="Sampling is unavailable: no LLM is attached to this MCP client.",
            )
        if getattr(params, "tools", None):
            return types.ErrorData(
                code=types.INVALID_PARAMS,
                message="Sampling with tools is not supported by this client.",
            )
        try:
            messages = _to_messages(params.messages)
        except ValueError as e:
            return types.ErrorData(code=types.INVALID_PARAMS, message=str(e))
        hints = getattr(getattr(params, "model_preferences", None), "hints", None) or []
        names = [h.name for h in hints if getattr(h, "name", None)]
        if names:
            logger.debug(f"MCP server '{server_id}' prefers models {names}; using {self.llm.model}")
        llm = self.llm
        limit = max(1, min(int(params.max_tokens), int(getattr(llm, "max_tokens", 4096))))
        key = "max_completion_tokens" if getattr(llm, "is_reasoning_model", False) else "max_tokens"
        extra: dict[str, Any] = {key: limit}
        if params.stop_sequences:
            extra["stop"] = list(params.stop_sequences)[:4]

        system = [Message.system_message(params.system_prompt)] if params.system_prompt else None
        logger.info(f"🧠 MCP server '{server_id}' asked for a completion ({limit} tokens max)")
        try:
            response = await llm.request(
                messages, system, temperature=params.temperature, stream=False, **extra
            )
        except (TimeoutError, OpenManusError, OSError) as e:
            return types.ErrorData(
                code=types.INTERNAL_ERROR, message=redact_registered(f"The LLM failed: {e}")
            )
        text = redact_registered(response.message.content or "")
        stop = "maxTokens" if response.finish_reason == "length" else "endTurn"
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=text),
            model=str(getattr(llm, "model", "unknown")),
            stop_reason=stop,
        )

    async def elicit(self, server_id: str, params: Any) -> Any:
        """Put the server's question to the user; accept/decline/cancel as they answer."""
        from mcp import types

        answer = await self._ask_until_valid(server_id, params)
        logger.info(f"MCP server '{server_id}' asked the user; answer: {answer.action}")
        if getattr(params, "mode", "form") == "url":
            return types.ElicitResult(action=answer.action)
        return answer

    async def _ask_until_valid(self, server_id: str, params: Any) -> ElicitResult:
        from mcp.types import ElicitResult

        provider = self.input_provider or get_input_provider()
        if getattr(params, "mode", "form") == "url":
            schema: dict[str, Any] = {}
            question = (
                f"MCP server '{server_id}' asks you to open this address: {params.url}\n"
                f"{params.message}\nType ok once you have done it, 'decline' to refuse, "
                "'cancel' or an empty line to dismiss."
            )
        else:
            schema = dict(params.requested_schema or {})
            question = describe_form(server_id, params.message, schema)
        for attempt in range(_ELICITATION_ATTEMPTS):
            try:
                reply = await asyncio.wait_for(provider.ask(question), _ELICITATION_TIMEOUT)
            except TimeoutError:
                break
            except Exception as e:  # a frontend's failure is a dismissed question, not a crash
                logger.warning(f"Could not ask the user for MCP server '{server_id}': {e}")
                break
            answer = parse_answer(reply, schema)
            if not isinstance(answer, str):
                return answer
            if attempt + 1 < _ELICITATION_ATTEMPTS:
                question = f"{answer} Please answer again.\n" + question.split("\n", 1)[-1]
        return ElicitResult(action="cancel")


def _to_messages(messages: list[Any]) -> list[Any]:
    """The server's conversation as our messages (text, and images as images)."""
    if not messages:
        raise ValueError("sampling needs at least one message")
    if len(messages) > _MAX_SAMPLING_MESSAGES:
        raise ValueError(f"sampling takes at most {_MAX_SAMPLING_MESSAGES} messages")
    out = []
    for message in messages:
        texts: list[str] = []
        image: str | None = None
        for block in message.content_as_list:
            kind = getattr(block, "type", None)
            if kind == "text":
                texts.append(block.text)
            elif kind == "image" and image is None:
                image = block.data
            else:
                texts.append(f"[{kind} content omitted]")
        text = "\n".join(texts)
        if message.role == "assistant":
            out.append(Message.assistant_message(text))
        else:
            out.append(Message.user_message(text, base64_image=image))
    return out


DECLINE_WORDS = frozenset({"decline", "no", "refuse", "deny"})
CANCEL_WORDS = frozenset({"", "cancel", "skip", "dismiss"})
_TRUE = frozenset({"true", "yes", "y", "1", "on"})
_FALSE = frozenset({"false", "no", "n", "0", "off"})


def describe_form(server_id: str, message: str, schema: dict[str, Any]) -> str:
    """The question put to the person: the server's message, the fields and how to answer."""
    properties = _properties(schema)
    required = set(schema.get("required") or [])
    lines = [f"MCP server '{server_id}' asks: {message}"]
    for name, spec in properties.items():
        kind = _kind(spec)
        extras = []
        choices = _choices(spec)
        if choices:
            extras.append("one of " + ", ".join(choices))
        if "default" in spec:
            extras.append(f"default {json.dumps(spec['default'])}")
        for key, word in (("minimum", "min"), ("maximum", "max")):
            if key in spec:
                extras.append(f"{word} {spec[key]}")
        detail = f" — {spec['description']}" if spec.get("description") else ""
        flag = "required" if name in required else "optional"
        more = f"; {'; '.join(extras)}" if extras else ""
        lines.append(f"  - {name} ({kind}, {flag}{more}){detail}")
    if len(properties) == 1:
        how = "Type the value"
    elif properties:
        how = 'Answer with a JSON object such as {"field": value}'
    else:
        how = "Type ok to agree"
    lines.append(f"{how}; 'decline' to refuse; 'cancel' or an empty line to dismiss.")
    return "\n".join(lines)


def parse_answer(text: str | None, schema: dict[str, Any]) -> ElicitResult | str:
    """The person's reply as the SDK's answer, or a message saying what is wrong with it."""
    from mcp.types import ElicitResult

    reply = (text or "").strip()
    word = reply.lower()
    if word in CANCEL_WORDS:  # no reply (None) too
        return ElicitResult(action="cancel")
    if word in DECLINE_WORDS:
        return ElicitResult(action="decline")
    properties = _properties(schema)
    if not properties:
        return ElicitResult(action="accept", content={})
    values: dict[str, Any]
    if reply.startswith("{"):
        try:
            parsed = json.loads(reply)
        except json.JSONDecodeError as e:
            return f"That is not valid JSON ({e.msg})."
        if not isinstance(parsed, dict):
            return "Answer with a JSON object."
        values = parsed
    elif len(properties) == 1:
        name, spec = next(iter(properties.items()))
        values = {name: _from_text(reply, spec)}
    else:
        return 'This form has several fields: answer with a JSON object, e.g. {"field": value}.'
    problem = check_answer(values, schema)
    if problem:
        return problem
    return ElicitResult(action="accept", content=_with_defaults(values, properties))


def check_answer(values: dict[str, Any], schema: dict[str, Any]) -> str | None:
    """What is wrong with ``values`` for ``schema`` (the flat subset elicitation allows)."""
    properties = _properties(schema)
    problems = []
    unknown = sorted(set(values) - set(properties))
    if unknown:
        problems.append(f"unknown field(s): {', '.join(unknown)}")
    for name in schema.get("required") or []:
        if name in properties and values.get(name) is None and "default" not in properties[name]:
            problems.append(f"'{name}' is required")
    for name, value in values.items():
        spec = properties.get(name)
        if spec is None or value is None:
            continue
        problem = _check_value(value, spec)
        if problem:
            problems.append(f"'{name}' {problem}")
    return "; ".join(problems) + "." if problems else None


def _properties(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(props, dict):
        return {}
    return {str(k): v for k, v in props.items() if isinstance(v, dict)}


def _kind(spec: dict[str, Any]) -> str:
    kind = spec.get("type")
    if kind == "array":
        return "list"
    fmt = spec.get("format")
    return f"{kind}, {fmt}" if isinstance(kind, str) and fmt else str(kind or "any")


def _choices(spec: dict[str, Any]) -> list[str]:
    """Allowed values (``enum``, ``oneOf``/``anyOf`` consts, or the items' for a list)."""
    source = spec.get("items") if spec.get("type") == "array" else spec
    if not isinstance(source, dict):
        return []
    if isinstance(source.get("enum"), list):
        return [str(v) for v in source["enum"]]
    options = source.get("oneOf") or source.get("anyOf")
    if isinstance(options, list):
        return [str(o["const"]) for o in options if isinstance(o, dict) and "const" in o]
    return []


def _from_text(text: str, spec: dict[str, Any]) -> Any:
    """A plain-text answer converted to the field's type where it is unambiguous."""
    kind = spec.get("type")
    if kind == "boolean":
        word = text.lower()
        return True if word in _TRUE else False if word in _FALSE else text
    if kind in ("integer", "number"):
        try:
            number = float(text)
        except ValueError:
            return text
        return int(number) if kind == "integer" and number.is_integer() else number
    if kind == "array":
        return [part.strip() for part in text.split(",") if part.strip()]
    return text


def _check_value(value: Any, spec: dict[str, Any]) -> str | None:
    kind = spec.get("type")
    if kind == "string":
        if not isinstance(value, str):
            return "must be text"
        if len(value) < spec.get("minLength", 0):
            return f"breaks minLength {spec['minLength']}"
        if len(value) > spec.get("maxLength", len(value)):
            return f"breaks maxLength {spec['maxLength']}"
    elif kind == "boolean":
        if not isinstance(value, bool):
            return "must be true or false"
    elif kind in ("integer", "number"):
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"must be a{'n integer' if kind == 'integer' else ' number'}"
        if kind == "integer" and not float(value).is_integer():
            return "must be an integer"
        if "minimum" in spec and value < spec["minimum"]:
            return f"must be at least {spec['minimum']}"
        if "maximum" in spec and value > spec["maximum"]:
            return f"must be at most {spec['maximum']}"
    elif kind == "array":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            return "must be a list of strings"
        if "minItems" in spec and len(value) < spec["minItems"]:
            return f"needs at least {spec['minItems']} item(s)"
        if "maxItems" in spec and len(value) > spec["maxItems"]:
            return f"takes at most {spec['maxItems']} item(s)"
        choices = _choices(spec)
        bad = [v for v in value if choices and v not in choices]
        if bad:
            return f"has {', '.join(bad)}, not among {', '.join(choices)}"
        return None
    choices = _choices(spec)
    if choices and str(value) not in choices:
        return f"must be one of {', '.join(choices)}"
    return None


def _with_defaults(values: dict[str, Any], properties: dict[str, dict[str, Any]]) -> dict[str, Any]:
    filled = {k: v for k, v in values.items() if v is not None}
    for name, spec in properties.items():
        if name not in filled and "default" in spec:
            filled[name] = spec["default"]
    return filled
