"""The schema of "one call of one offered tool" (app.llm.call_schema): always in the subset a
constrained decoder handles, bounded whatever a tool (an MCP server's, say) declares, and
the lenient reading of what a grammar lets through."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.llm.call_schema import (
    ANY,
    MAX_ANSWER,
    arguments_schema,
    call_parts,
    call_schema,
    check_schema,
    problems,
    read_json,
)
from app.llm.model import ToolDefinition
from app.llm.openai.structured import strict_schema


def nodes(schema: dict) -> list[dict]:
    """Every schema node of a reduced schema."""
    found = [schema]
    for sub in schema.get("anyOf", []):
        found += nodes(sub)
    for sub in schema.get("properties", {}).values():
        found += nodes(sub)
    if "items" in schema:
        found += nodes(schema["items"])
    return found


def manus_tools(tmp_path: Path) -> list[ToolDefinition]:
    from app.agent.manus import Manus

    return [ToolDefinition.from_param(p) for p in Manus.default_tools(tmp_path).to_params()]


def test_manus_tools_make_one_call_schema_in_the_subset(tmp_path: Path) -> None:
    tools = manus_tools(tmp_path)
    call = call_schema(tools)
    check_schema(call.schema)
    assert call.names == [t.name for t in tools]
    assert [option["properties"]["name"] for option in call.schema["anyOf"]] == [
        {"const": t.name} for t in tools
    ]
    assert call.arguments["terminate"] == {
        "type": "object",
        "properties": {"status": {"enum": ["success", "failure"]}},
        "required": ["status"],
    }
    editor = call.arguments["str_replace_editor"]
    assert editor["required"] == ["command", "path"]
    assert editor["properties"]["view_range"] == {"type": "array", "items": {"type": "integer"}}
    assert all("description" not in json.dumps(s) for s in call.arguments.values())


def test_tool_choice_narrows_the_schema_to_one_call(tmp_path: Path) -> None:
    tools = manus_tools(tmp_path)
    choice = {"type": "function", "function": {"name": "bash"}}
    call = call_schema(tools, choice)
    assert call.names == ["bash"] and "anyOf" not in call.schema
    assert call.schema["properties"]["name"] == {"const": "bash"}
    with pytest.raises(ValueError, match="not offered"):
        call_schema(tools, {"type": "function", "function": {"name": "rm_rf"}})


HOSTILE: dict[str, object] = {
    "ref loop": {"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/a"}}},
    "ref to nowhere": {"type": "object", "properties": {"x": {"$ref": "#/$defs/missing"}}},
    "remote ref": {"type": "object", "properties": {"x": {"$ref": "http://evil/schema"}}},
    "deep": json.loads(
        '{"type":"object","properties":{"a":' * 60 + '{"type":"string"}' + "}}" * 60
    ),
    "huge enum": {
        "type": "object",
        "properties": {"x": {"enum": [f"v{i}" for i in range(10_000)]}},
    },
    "quote in a name": {"type": "object", "properties": {'a"b': {"type": "string"}}},
    "backslash in a name": {"type": "object", "properties": {"a\\": {"type": "string"}}},
    "newline in a name": {"type": "object", "properties": {"a\nb": {"type": "string"}}},
    "quote in an enum": {"type": "object", "properties": {"x": {"enum": ['"', "\\"]}}},
    "quote in a const": {"type": "object", "properties": {"x": {"const": 'say "hi"'}}},
    "maxItems of a billion": {
        "type": "object",
        "properties": {"x": {"type": "array", "items": {"type": "string"}, "maxItems": 10**9}},
    },
    "pattern and format": {
        "type": "object",
        "properties": {"x": {"type": "string", "pattern": "^(a|", "format": "date-time"}},
    },
    "allOf": {
        "allOf": [
            {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
            {"properties": {"b": {"type": "string"}}},
        ]
    },
    "a thousand alternatives": {
        "type": "object",
        "properties": {"x": {"oneOf": [{"const": i} for i in range(1000)]}},
    },
    "empty schema": {},
    "true": True,
    "not an object": "string",
    "required names missing": {"type": "object", "properties": {}, "required": ["ghost"]},
    "nullable": {"type": "object", "properties": {"x": {"type": "string", "nullable": True}}},
    "type list": {"type": "object", "properties": {"x": {"type": ["integer", "number", "x"]}}},
    "unknown type": {"type": "object", "properties": {"x": {"type": "bigint"}}},
    "open object": {"type": "object", "additionalProperties": {"type": "string"}},
    "NaN const": {"type": "object", "properties": {"x": {"const": float("nan")}}},
}


@pytest.mark.parametrize("schema", list(HOSTILE.values()), ids=list(HOSTILE))
def test_any_declared_schema_reduces_to_a_small_one_in_the_subset(schema: object) -> None:
    """What a hostile or careless tool declares never reaches the server as it is: the
    reduced schema passes the subset check, stays small, and only loosens (a value the
    tool's own check accepts is never refused by the grammar)."""
    reduced = arguments_schema(schema)
    check_schema(reduced)
    assert reduced.get("type") == "object"
    assert len(json.dumps(reduced)) < 20_000
    assert all(node for node in nodes(reduced))  # llama-cpp-python reads {} as "any object"
    check_schema(call_schema([ToolDefinition("t", parameters=schema)]).schema)  # type: ignore[arg-type]


def test_what_the_reduction_keeps(tmp_path: Path) -> None:
    merged = arguments_schema(HOSTILE["allOf"])
    assert merged["properties"] == {"a": {"type": "integer"}, "b": {"type": "string"}}
    assert merged["required"] == ["a"]
    assert arguments_schema(HOSTILE["nullable"])["properties"]["x"] == {"type": ["string", "null"]}
    assert arguments_schema(HOSTILE["type list"])["properties"]["x"] == {"type": "number"}
    assert arguments_schema(HOSTILE["quote in a name"]) == {"type": "object"}
    assert arguments_schema(HOSTILE["huge enum"])["properties"]["x"] == {"type": "string"}
    assert arguments_schema(HOSTILE["ref to nowhere"])["properties"]["x"] == ANY
    deep = json.dumps(arguments_schema(HOSTILE["deep"]))
    assert deep.count('"properties"') <= 8


def test_required_properties_come_first_in_their_order() -> None:
    """A grammar writes an object's properties in the schema's order: the required ones
    first (in the order the tool gives them), then the rest as given."""
    schema = {
        "type": "object",
        "properties": {
            "text": {"type": "string"},
            "path": {"type": "string"},
            "mode": {"enum": ["a", "w"]},
            "command": {"type": "string"},
        },
        "required": ["command", "path"],
    }
    reduced = arguments_schema(schema)
    assert list(reduced["properties"]) == ["path", "command", "text", "mode"]
    assert reduced["required"] == ["command", "path"]


def test_tools_whose_names_a_grammar_cannot_hold_are_left_out() -> None:
    tools = [ToolDefinition('bad"name'), ToolDefinition("bad\\name"), ToolDefinition("good")]
    assert call_schema(tools).names == ["good"]
    with pytest.raises(ValueError, match="no callable tool"):
        call_schema(tools[:2])


@pytest.mark.parametrize(
    "schema",
    [
        {},
        {"type": "string", "pattern": "a"},
        {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": True},
        {"type": "object", "properties": {'a"': {"type": "string"}}},
        {"type": "object", "properties": {}, "required": ["a"]},
        {"type": "bigint"},
        {"enum": ['"']},
        {"anyOf": []},
        {"type": "string", "description": "not sent"},
    ],
)
def test_check_schema_refuses_what_is_outside_the_subset(schema: dict) -> None:
    with pytest.raises(ValueError):
        check_schema(schema)


def test_problems_checks_values_against_the_subset() -> None:
    schema = arguments_schema(
        {
            "type": "object",
            "properties": {
                "command": {"enum": ["view", "create"]},
                "n": {"type": "integer"},
                "tags": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["command"],
        }
    )
    assert problems({"command": "view", "n": 3, "tags": ["a"]}, schema) == []
    assert problems({}, schema) == ["arguments.command is missing"]
    assert problems({"command": "delete"}, schema) == [
        'arguments.command must be one of ["view", "create"]'
    ]
    assert problems({"command": "view", "n": True}, schema) == [
        "arguments.n must be integer, not boolean"
    ]
    assert problems({"command": "view", "tags": [1]}, schema) == [
        "arguments.tags[0] must be string, not integer"
    ]
    assert problems({"command": "view", "extra": 1}, schema) == [
        "arguments.extra is not an argument"
    ]


def test_an_answer_is_read_leniently() -> None:
    """llama-cpp-python's string rule lets raw newlines through; a model may go on after the
    object: both still read as the call."""
    raw_newline = '{"name": "bash", "arguments": {"command": "printf \'a\nb\'"}}'
    assert read_json(raw_newline) == {"name": "bash", "arguments": {"command": "printf 'a\nb'"}}
    assert read_json('{"name": "bash", "arguments": {}}\n```\nDone!') == {
        "name": "bash",
        "arguments": {},
    }
    assert read_json('Here: {"name": "bash", "arguments": {}}') == {"name": "bash", "arguments": {}}
    for broken in ("", "prose only", '{"name": "bash", "arguments": {', "[1, 2]", None):
        assert read_json(broken) is None
    assert read_json("{" + " " * MAX_ANSWER + "}") is None
    assert read_json("[" * 100_000) is None


def test_call_parts_wants_an_offered_name_and_an_object() -> None:
    names = ["bash"]
    assert call_parts({"name": "bash", "arguments": {"command": "ls"}}, names) == (
        "bash",
        {"command": "ls"},
    )
    assert call_parts({"name": "bash", "arguments": '{"command": "ls"}'}, names) == (
        "bash",
        {"command": "ls"},
    )
    assert call_parts({"name": "bash", "parameters": {}}, names) == ("bash", {})
    for value in (
        {"name": "rm", "arguments": {}},
        {"name": "bash", "arguments": [1]},
        {"name": "bash", "arguments": "not json"},
        {"arguments": {}},
        ["bash"],
    ):
        assert call_parts(value, names) is None


def test_openai_strict_form_requires_every_property(tmp_path: Path) -> None:
    editor = call_schema(manus_tools(tmp_path)).arguments["str_replace_editor"]
    strict = strict_schema(editor)
    assert strict is not None
    assert strict["additionalProperties"] is False
    assert strict["required"] == list(strict["properties"])
    assert strict["properties"]["file_text"] == {"type": ["string", "null"]}
    assert strict["properties"]["command"]["enum"] == editor["properties"]["command"]["enum"]
    assert strict_schema({"type": "object"}) is None  # any object: cannot be strict
