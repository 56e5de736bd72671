"""How each kind of OpenAI-compatible server answers a request for structured output, for
tests of constrained tool calling: a responder for :class:`~app.testing.ScriptedLLMServer`
(``ScriptedLLMServer(responder=server_kind("llama-cpp-python", calls))``).

What each kind does with each request field (docs/local-models.md, "Constrained tool
calling"), as seen on the real servers or documented by them:

=================  ==============  ===============  ==============  ======================
kind               ``json_schema``  ``json_object``  ``guided_json``  ``strict`` functions
=================  ==============  ===============  ==============  ======================
llama-cpp-python   HTTP 500         honoured         ignored          tools ignored (prose)
vllm               honoured         JSON, no schema  honoured         native call
vllm-0.4           HTTP 400         JSON, no schema  honoured         native call
ollama             honoured         JSON, no schema  ignored          native call
openai             honoured         HTTP 400         HTTP 400         native call
plain              ignored          ignored          ignored          tools ignored (prose)
=================  ==============  ===============  ==============  ======================

A request without any of them and without tools (text tool calling) is answered with the next
call written in a ``<tool_call>`` block; an honoured schema of the tool's name alone, or of
its arguments alone (``constrained_steps = 2``), gets that part of the next call. Every
request is still recorded by the server, so a test reads the exact field that was sent.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from app.testing.replies import Reply, call, error, text, tool_calls
from app.testing.wire import CapturedRequest

#: A call the server answers with: the tool's name and its arguments.
Call = tuple[str, dict[str, Any]]

#: What llama-cpp-python 0.3.36 answers a ``json_schema`` response format with (HTTP 500).
LLAMA_CPP_JSON_SCHEMA = (
    "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', "
    "'type'), 'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema', "
    "'ctx': {'expected': \"'text' or 'json_object'\"}}"
)


@dataclass(frozen=True)
class Kind:
    """One server kind: the forms it honours, those it refuses (status, message), and
    whether it calls tools natively; any other form is ignored."""

    honours: frozenset[str]
    refuses: dict[str, tuple[int, str]]
    native_tools: bool
    json_mode: bool = False  # json_object without a schema: JSON that ignores the schema


KINDS: dict[str, Kind] = {
    "llama-cpp-python": Kind(
        frozenset({"json_object"}), {"json_schema": (500, LLAMA_CPP_JSON_SCHEMA)}, False
    ),
    "vllm": Kind(frozenset({"json_schema", "guided_json", "strict"}), {}, True, json_mode=True),
    # Releases before response_format took a json_schema: only their own guided_json.
    "vllm-0.4": Kind(
        frozenset({"guided_json", "strict"}),
        {"json_schema": (400, "response_format.type json_schema is not supported")},
        True,
        json_mode=True,
    ),
    "ollama": Kind(frozenset({"json_schema", "strict"}), {}, True, json_mode=True),
    "openai": Kind(
        frozenset({"json_schema", "strict"}),
        {
            "guided_json": (400, "Unrecognized request argument supplied: guided_json"),
            "json_object": (400, "Unknown parameter: 'response_format.schema'."),
        },
        True,
    ),
    "plain": Kind(frozenset(), {}, False),
}

#: What a server says when it ignores the field and the tools (the model's prose).
PROSE = "Sure! I will create the file for you."


def schema_of(body: Any, form: str) -> Any:
    """The schema a request by a text-answering ``form`` asks for."""
    if form == "guided_json":
        return body.get("guided_json")
    response_format = body.get("response_format") or {}
    if form == "json_schema":
        return (response_format.get("json_schema") or {}).get("schema")
    return response_format.get("schema")


def _answer(schema: Any, next_call: Callable[[], Call], queue: list[Call]) -> dict[str, Any]:
    """What a server honouring ``schema`` answers with: the whole call; for two-step
    constrained calls (docs/local-models.md), the next call's name alone (the call stays
    next) or, for a schema of arguments, its arguments alone."""
    properties = schema.get("properties", {}) if isinstance(schema, dict) else {}
    if set(properties) == {"name"} and "enum" in properties["name"]:
        return {"name": queue[0][0]}
    if isinstance(schema, dict) and "anyOf" not in schema and "arguments" not in properties:
        return next_call()[1]
    name_, arguments = next_call()
    return {"name": name_, "arguments": arguments}


def form_of(body: Any) -> str | None:
    """The structured-output form a request carries (None: none)."""
    if not isinstance(body, dict):
        return None
    response_format = body.get("response_format")
    if isinstance(response_format, dict):
        kind = response_format.get("type")
        if kind == "json_schema":
            return "json_schema"
        if kind == "json_object" and "schema" in response_format:
            return "json_object"
    if "guided_json" in body:
        return "guided_json"
    tools = body.get("tools")
    if isinstance(tools, list) and any(
        isinstance(t, dict) and (t.get("function") or {}).get("strict") is True for t in tools
    ):
        return "strict"
    return None


def server_kind(
    name: str, calls: Iterable[Call], *, prose: str = PROSE
) -> Callable[[CapturedRequest], Reply]:
    """A responder answering as server kind ``name`` (a key of :data:`KINDS`), each answer
    that calls a tool taking the next of ``calls`` (the last one is repeated)."""
    kind = KINDS[name]
    queue = list(calls)
    if not queue:
        raise ValueError("server_kind() needs at least one call to answer with")

    def next_call() -> Call:
        return queue.pop(0) if len(queue) > 1 else queue[0]

    def respond(request: CapturedRequest) -> Reply:
        form = form_of(request.body)
        if form in kind.refuses:
            status, message = kind.refuses[form]
            return error(status, message)
        if form == "strict" or (form is None and request.tools):
            if kind.native_tools:
                name_, arguments = next_call()
                return tool_calls(call(name_, arguments))
            return text(prose)  # the tools never reached the model
        if form is not None:
            if form in kind.honours:
                return text(json.dumps(_answer(schema_of(request.body, form), next_call, queue)))
            if form == "json_object" and kind.json_mode:
                return text(json.dumps({"answer": prose}))
            return text(prose)
        name_, arguments = next_call()  # text tool calling: the call written in the answer
        block = json.dumps({"name": name_, "arguments": arguments})
        return text(f"<tool_call>{block}</tool_call>")

    return respond
