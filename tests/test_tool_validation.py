"""Tool arguments are checked against the tool's JSON schema before the tool runs: through the
tool API, and with a scripted hostile model driving a ToolCallAgent over real HTTP."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from app.agent.toolcall import ToolCallAgent
from app.exceptions import ToolArgumentsError
from app.schema import AgentState
from app.testing import call, text, tool_calls
from app.tool.base import BaseTool, ToolFailure
from app.tool.planning import PlanningTool
from app.tool.terminate import Terminate
from app.tool.tool_collection import ToolCollection
from app.tool.validation import MAX_DEPTH, compile_arguments_schema, validator_for


class Recorder(BaseTool):
    """Records the arguments it ran with; its schema uses every keyword we check."""

    name: str = "rec"
    description: str = "Record the arguments."
    parameters: dict[str, Any] | None = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 10},
            "count": {"type": "integer", "minimum": 1, "maximum": 5},
            "ratio": {"type": "number", "exclusiveMinimum": 0},
            "flag": {"type": "boolean"},
            "mode": {"type": "string", "enum": ["fast", "slow"]},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
            "maybe": {"type": ["string", "null"]},
            "point": {
                "type": "object",
                "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
                "required": ["x", "y"],
            },
            "free": {"type": "object"},
            "note": {"type": "string", "format": "email", "pattern": "^n", "x-custom": 1},
        },
        "required": ["name"],
    }
    calls: list[dict[str, Any]] = []

    async def execute(self, **kwargs: Any) -> str:
        self.calls.append(kwargs)
        return "recorded"


def problems(schema: dict[str, Any] | None, args: Any) -> list[str]:
    with pytest.raises(ToolArgumentsError) as info:
        compile_arguments_schema(schema).validate("t", args)
    assert info.value.tool == "t"
    return [str(p) for p in info.value.problems]


async def test_every_problem_is_listed_at_once_and_the_tool_does_not_run():
    tool = Recorder(calls=[])
    result = await ToolCollection(tool).execute(
        name="rec",
        tool_input={
            "count": 9,
            "ratio": 0,
            "flag": "yes",
            "mode": "medium",
            "tags": ["a", 2, "c", "d"],
            "point": {"x": 1, "z": 2},
            "volume": 11,
        },
    )
    assert isinstance(result, ToolFailure) and tool.calls == []
    lines = result.error.splitlines()
    assert lines[0] == (
        "Invalid arguments for tool 'rec' (it was not run); fix all of these and call it again:"
    )
    assert set(lines[1:]) == {
        "- count: expected at most 5, got 9",
        "- ratio: expected more than 0, got 0",
        '- flag: expected boolean, got string "yes"',
        '- mode: expected one of "fast", "slow", got string "medium"',
        "- tags: expected at most 3 items, got 4",
        "- point.z: unknown property (allowed: x, y)",
        "- point.y: missing required argument; expected integer",
        "- volume: unknown argument (allowed: name, count, ratio, flag, mode, tags, maybe, "
        "point, free, note)",
        "- name: missing required argument; expected string",
    }


async def test_each_kind_of_violation_names_parameter_expectation_and_value():
    schema = Recorder().parameters
    assert problems(schema, {"name": ""}) == ["name: expected at least 1 characters, got 0"]
    assert problems(schema, {"name": "x" * 11}) == ["name: expected at most 10 characters, got 11"]
    assert problems(schema, {"name": "a", "count": 0}) == ["count: expected at least 1, got 0"]
    assert problems(schema, {"name": "a", "count": 2.5}) == [
        "count: expected integer, got number 2.5"
    ]
    assert problems(schema, {"name": "a", "count": True}) == [
        "count: expected integer, got boolean true"
    ]
    assert problems(schema, {"name": "a", "tags": ["ok", 3]}) == [
        "tags[1]: expected string, got integer 3"
    ]
    assert problems(schema, {"name": "a", "tags": "not-json"}) == [
        'tags: expected array of string, got string "not-json"'
    ]
    assert problems(schema, {"name": "a", "maybe": 3}) == [
        "maybe: expected string or null, got integer 3"
    ]
    assert problems(schema, {"name": "a", "point": [1, 2]}) == [
        "point: expected object, got an array of 2 items"
    ]
    assert problems(schema, {"name": 7}) == ["name: expected string, got integer 7"]
    assert problems(schema, [1]) == ["(arguments): expected an object, got an array of 1 item"]
    long = problems(schema, {"name": "a", "count": "z" * 500})
    assert long[0].startswith('count: expected integer, got string "zzz') and len(long[0]) < 120
    assert problems({"type": "object", "properties": {"k": {"const": "x"}}}, {"k": "y"}) == [
        'k: expected "x", got string "y"'
    ]


async def test_lossless_coercion_and_what_is_never_coerced():
    tool = Recorder(calls=[])
    tools = ToolCollection(tool)
    result = await tools.execute(
        name="rec",
        tool_input={
            "name": "a",
            "count": " 3 ",
            "ratio": "2.5",
            "flag": "TRUE",
            "tags": '["x", "y"]',
            "point": {"x": "1", "y": 2.0},
            "maybe": None,
        },
    )
    assert result.output == "recorded" and not result.failed
    assert tool.calls[-1] == {
        "name": "a",
        "count": 3,
        "ratio": 2.5,
        "flag": True,
        "tags": ["x", "y"],
        "point": {"x": 1, "y": 2},
        "maybe": None,
    }
    assert type(tool.calls[-1]["point"]["y"]) is int
    # never a number into a string, never a lossy number, never a word into a boolean
    for args, expected in [
        ({"name": 5}, "name: expected string, got integer 5"),
        ({"name": "a", "count": "3.5"}, 'count: expected integer, got string "3.5"'),
        ({"name": "a", "count": "1e2"}, 'count: expected integer, got string "1e2"'),
        ({"name": "a", "ratio": "nan"}, 'ratio: expected number, got string "nan"'),
        ({"name": "a", "ratio": "1e999"}, 'ratio: expected number, got string "1e999"'),
        ({"name": "a", "flag": 1}, "flag: expected boolean, got integer 1"),
        (
            {"name": "a", "tags": '{"a": 1}'},
            'tags: expected array of string, got string "{\\"a\\": 1}"',
        ),
    ]:
        assert problems(Recorder().parameters, args) == [expected]
    assert tool.calls[-1]["maybe"] is None and len(tool.calls) == 1


async def test_null_for_an_optional_argument_means_not_given():
    tool = Recorder(calls=[])
    assert (
        await ToolCollection(tool).execute(
            name="rec", tool_input={"name": "a", "count": None, "point": None, "mode": None}
        )
    ).output == "recorded"
    assert tool.calls == [{"name": "a"}]  # the tool's own defaults apply
    assert problems(Recorder().parameters, {"name": None}) == [
        "name: expected string, got null"
    ]  # required: null is not a value


async def test_terminate_with_a_status_outside_its_enum():
    tools = ToolCollection(Terminate())
    bad = await tools.execute(name="terminate", tool_input={"status": "maybe"})
    assert bad.error.splitlines()[1] == (
        '- status: expected one of "success", "failure", got string "maybe"'
    )
    extra = await tools.execute(name="terminate", tool_input={"status": "success", "why": 1})
    assert extra.error.splitlines()[1:] == ["- why: unknown argument (allowed: status)"]


async def test_planning_with_nested_wrong_types_creates_no_plan():
    planning = PlanningTool()
    result = await ToolCollection(planning).execute(
        name="planning", tool_input={"command": "create", "plan_id": "p", "steps": [1, 2]}
    )
    assert result.error.splitlines()[1:] == [
        "- steps[0]: expected string, got integer 1",
        "- steps[1]: expected string, got integer 2",
    ]
    assert planning.plans == {}


async def test_hugely_nested_arguments_give_a_clear_error_not_a_recursion_error():
    deep: Any = "leaf"
    for _ in range(100_000):
        deep = [deep]
    result = await ToolCollection(PlanningTool()).execute(
        name="planning", tool_input={"command": "create", "plan_id": "p", "steps": deep}
    )
    assert result.error.splitlines()[1:] == ["- steps[0]: expected string, got an array of 1 item"]

    # A recursive schema (a tree, as pydantic writes it for MCP servers) is followed only so
    # far: the error names where it stopped, briefly.
    class Tree(BaseModel):
        name: str
        children: list[Tree] = []

    tree: dict[str, Any] = {"name": "leaf"}
    for _ in range(100_000):
        tree = {"name": "n", "children": [tree]}
    [problem] = problems(Tree.model_json_schema(), tree)
    assert problem.endswith(
        f"nested too deeply to check (more than {MAX_DEPTH} levels); send a flatter value"
    )
    assert problem.startswith("children[0].children[0]") and "…" in problem
    assert len(problem) < 200
    shallow = {"name": "a", "children": [{"name": "b", "children": [{"name": 3}]}]}
    assert problems(Tree.model_json_schema(), shallow) == [
        "children[0].children[0].name: expected string, got integer 3"
    ]


def test_many_problems_are_capped_and_counted():
    with pytest.raises(ToolArgumentsError) as info:
        compile_arguments_schema(PlanningTool().parameters).validate(
            "planning", {"command": "create", "steps": list(range(1000))}
        )
    assert len(info.value.problems) == 20 and info.value.count == 1000
    assert info.value.message.endswith("- ... and 980 more problem(s) like these")


def test_unknown_keywords_and_unreadable_schemas_never_reject():
    """MCP servers send schemas of every kind: what we do not implement is ignored."""
    lenient = [
        None,
        {},
        {"type": "object", "properties": {"a": {"type": "any"}}},
        {"type": "object", "properties": {"a": {"$ref": "https://example.com/s.json"}}},
        {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}},
        {"type": "object", "properties": {"a": {"not": {"type": "string"}}}},
        {"type": "object", "properties": {"a": {}}, "additionalProperties": True},
        {"type": "object", "properties": {"a": {}}, "patternProperties": {"^b": {}}},
        {"allOf": [{"properties": {"a": {}}}, {"properties": {"b": {}}}]},
        {"type": "object", "properties": {"a": {"if": {}, "then": {}, "dependencies": {}}}},
    ]
    for schema in lenient:
        assert compile_arguments_schema(schema).validate("t", {"a": "x"}) == {"a": "x"}
    for schema in [*lenient[:2], *lenient[6:9]]:  # open objects take other keys too
        assert compile_arguments_schema(schema).validate("t", {"a": "x", "b": 1}) == {
            "a": "x",
            "b": 1,
        }
    typed = {"type": "object", "additionalProperties": {"type": "integer"}}
    assert problems(typed, {"a": "x"}) == ['a: expected integer, got string "x"']


def test_anyof_and_refs_as_pydantic_writes_them():
    class Point(BaseModel):
        x: int
        y: int | None = None

    class Args(BaseModel):
        where: Point
        label: str | int | None = None

    schema = Args.model_json_schema()
    validator = compile_arguments_schema(schema)
    assert validator.validate("t", {"where": {"x": "4"}, "label": 5}) == {
        "where": {"x": 4},
        "label": 5,
    }
    assert problems(schema, {"where": {"x": 1, "q": 0}, "label": [1]}) == [
        "where.q: unknown property (allowed: x, y)",
        "label: expected string or integer or null, got an array of 1 item",
    ]


def test_the_schema_sent_to_the_model_is_unchanged_and_compiled_once():
    planning = PlanningTool()
    before = json.dumps(planning.parameters, sort_keys=True)
    planning.validate_arguments({"command": "list"})
    assert json.dumps(planning.parameters, sort_keys=True) == before
    assert planning.to_param()["function"]["parameters"] is planning.parameters
    first = validator_for(planning.parameters)
    assert validator_for(planning.parameters) is first
    assert validator_for(PlanningTool().parameters) is first  # equal schemas share one
    planning.parameters = {"type": "object", "properties": {}}  # replaced: compiled anew
    with pytest.raises(ToolArgumentsError):
        planning.validate_arguments({"command": "list"})


# ---- a hostile model driving the agent, over real HTTP ----------------------------------------


def _tool_messages(request: Any) -> list[str]:
    return [m["content"] for m in request.body["messages"] if m["role"] == "tool"]


async def test_model_sends_a_bad_terminate_status_then_a_good_one(llm_server, make_llm):
    llm_server.push(
        tool_calls(call("terminate", {"status": "maybe"})),
        tool_calls(call("terminate", {"status": "success"})),
        text("never asked for"),
    )
    agent = ToolCallAgent(llm=make_llm(), available_tools=ToolCollection(Terminate()))
    result = await agent.run("finish")
    assert result.state == AgentState.FINISHED and result.steps == 2
    assert len(llm_server.requests) == 2
    [first] = _tool_messages(llm_server.requests[1])
    assert "Invalid arguments for tool 'terminate'" in first
    assert '- status: expected one of "success", "failure", got string "maybe"' in first


async def test_model_sends_unknown_and_nested_wrong_arguments(llm_server, make_llm):
    planning = PlanningTool()
    llm_server.push(
        tool_calls(
            call("planning", {"command": "create", "plan_id": "p", "steps": [1, 2]}),
            call("planning", {"command": "list", "verbose": True}),
        ),
        tool_calls(
            call("planning", {"command": "create", "plan_id": "p", "title": "t", "steps": ["a"]})
        ),
        tool_calls(call("terminate", {"status": "success"})),
    )
    agent = ToolCallAgent(llm=make_llm(), available_tools=ToolCollection(planning, Terminate()))
    await agent.run("plan")
    nested, unknown = _tool_messages(llm_server.requests[1])
    assert "- steps[0]: expected string, got integer 1" in nested
    assert "- steps[1]: expected string, got integer 2" in nested
    assert "- verbose: unknown argument (allowed: command, plan_id" in unknown
    assert list(planning.plans) == ["p"] and planning.plans["p"]["steps"] == ["a"]


async def test_model_sends_arguments_nested_100000_deep(llm_server, make_llm):
    deep = '{"command": "create", "plan_id": "p", "steps": ' + "[" * 100_000 + "]" * 100_000 + "}"
    planning = PlanningTool()
    llm_server.push(tool_calls(call("planning", deep)), text("gave up"))
    agent = ToolCallAgent(llm=make_llm(), available_tools=ToolCollection(planning, Terminate()))
    result = await agent.run("plan")
    assert result.state == AgentState.FINISHED and planning.plans == {}
    [message] = _tool_messages(llm_server.requests[1])
    assert message.startswith("Error: Could not parse the arguments of tool 'planning'")
    assert "nested too deeply" in message
