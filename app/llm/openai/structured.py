"""How a chat-completions endpoint is asked for an answer that matches a JSON schema: the
request field each kind of server honours (``app.llm.constrained`` tries them in turn on first
contact and remembers the one that works).

- ``json_schema``: ``response_format: {"type": "json_schema", ...}``: vLLM, Ollama, llama.cpp's
  ``llama-server``, LM Studio, OpenAI.
- ``json_object``: ``response_format: {"type": "json_object", "schema": ...}``:
  llama-cpp-python (which answers ``json_schema`` with HTTP 500) and ``llama-server``.
- ``guided_json``: vLLM's own field (older releases).
- ``strict``: OpenAI's strict function schemas, the call forced by ``tool_choice``: the answer
  comes back as the API's own tool call (OpenAI and Azure, tried first there).

A GBNF ``grammar`` (llama.cpp) is never sent: a grammar the server cannot parse crashes
llama-cpp-python, and ``json_object`` with a schema reaches the same grammar through the
server's own converter, fed only the subset it handles (``app.llm.call_schema``).
"""

from __future__ import annotations

import dataclasses
import re
import urllib.parse
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from app.exceptions import LLMError, ToolsNotSupportedError
from app.llm.call_schema import CallSchema
from app.llm.model import ModelParams, ToolDefinition

if TYPE_CHECKING:
    from app.config import LLMSettings

#: The forms, in the order an endpoint of unknown kind gets them.
FORMS = ("json_schema", "json_object", "guided_json")
#: OpenAI's own endpoints: strict functions first.
OPENAI_FORMS = ("strict", "json_schema")
#: Words of an error that refuses one of the fields (a validation error naming it, say).
_FIELD_WORDS = r"response_format|json_schema|json_object|guided_json|\bschema\b|\bstrict\b"


class OpenAIStructuredOutput:
    """The forms of one OpenAI-compatible endpoint (``settings``), in the order to try them."""

    def __init__(self, settings: LLMSettings) -> None:
        host = urllib.parse.urlsplit(settings.base_url or "https://api.openai.com/v1").hostname
        openai = settings.api_type == "azure" or (host or "").endswith(
            ("api.openai.com", ".openai.azure.com")
        )
        self._forms = OPENAI_FORMS if openai else FORMS

    def forms(self) -> Sequence[str]:
        return self._forms

    def answers_natively(self, form: str) -> bool:
        return form == "strict"

    def params(self, form: str, params: ModelParams, call: CallSchema) -> ModelParams:
        if form == "strict":
            tools = tuple(
                strict_tool(tool, call.arguments[tool.name])
                for tool in params.tools
                if tool.name in call.arguments
            )
            choice: Any = (
                {"type": "function", "function": {"name": call.names[0]}}
                if len(call.names) == 1
                else "required"
            )
            extra = {**params.extra, "parallel_tool_calls": False}
            return dataclasses.replace(params, tools=tools, tool_choice=choice, extra=extra)
        fields: dict[str, Any]
        if form == "json_schema":
            fields = {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "tool_call", "schema": call.schema},
                }
            }
        elif form == "json_object":
            fields = {"response_format": {"type": "json_object", "schema": call.schema}}
        elif form == "guided_json":
            fields = {"guided_json": call.schema}
        else:
            raise ValueError(f"Unknown structured-output form {form!r}")
        return dataclasses.replace(
            params, tools=(), tool_choice="auto", extra={**params.extra, **fields}
        )

    def refuses(self, form: str, error: LLMError) -> bool:
        if form == "strict" and isinstance(error, ToolsNotSupportedError):
            return True
        return re.search(_FIELD_WORDS, error.message, re.IGNORECASE) is not None


def strict_tool(tool: ToolDefinition, schema: dict[str, Any]) -> ToolDefinition:
    """``tool`` with OpenAI's strict form of its reduced ``schema``; as it was when the schema
    cannot be strict (an object of any keys)."""
    strict = strict_schema(schema)
    if strict is None:
        return tool
    return ToolDefinition(
        name=tool.name,
        description=tool.description,
        parameters=strict,
        source={
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": strict,
                "strict": True,
            },
        },
    )


def strict_schema(schema: dict[str, Any]) -> dict[str, Any] | None:
    """A reduced schema as OpenAI's strict mode wants it: every property required (an optional
    one may be null), objects closed; None when that cannot be said (an object of any keys)."""
    if "anyOf" in schema:
        options = [strict_schema(option) for option in schema["anyOf"]]
        if any(option is None for option in options):
            return None
        return {"anyOf": options}
    kind = schema.get("type")
    if kind == "object" or (isinstance(kind, list) and "object" in kind):
        if kind != "object" or "properties" not in schema:
            return None
        properties: dict[str, Any] = {}
        required = set(schema.get("required", ()))
        for name, sub in schema["properties"].items():
            strict = strict_schema(sub)
            if strict is None:
                return None
            properties[name] = strict if name in required else _nullable(strict)
        return {
            "type": "object",
            "properties": properties,
            "required": list(properties),
            "additionalProperties": False,
        }
    if kind == "array" or (isinstance(kind, list) and "array" in kind):
        if kind != "array" or "items" not in schema:
            return None
        items = strict_schema(schema["items"])
        return None if items is None else {"type": "array", "items": items}
    return dict(schema)


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    kind = schema.get("type")
    if isinstance(kind, str):
        return {**schema, "type": [kind, "null"]} if kind != "null" else schema
    if isinstance(kind, list):
        return schema if "null" in kind else {**schema, "type": [*kind, "null"]}
    return {"anyOf": [schema, {"type": "null"}]}
