"""Tool results, the tool collection, terminate and create_chat_completion."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from app.exceptions import ToolError
from app.tool.base import BaseTool, CLIResult, ToolFailure, ToolResult
from app.tool.create_chat_completion import CreateChatCompletion
from app.tool.terminate import Terminate
from app.tool.tool_collection import ToolCollection


class Adder(BaseTool):
    name: str = "add"
    description: str = "Add two integers."
    parameters: dict[str, Any] | None = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    }

    async def execute(self, a: int, b: int) -> dict[str, int]:
        if a < 0:
            raise ToolError("a must not be negative")
        if a == 13:
            raise KeyError("unlucky")
        return {"sum": a + b}


def test_tool_result_strings():
    assert str(ToolResult(output="x")) == "x"
    assert str(ToolResult(output={"k": [1, 2]})) == '{"k": [1, 2]}'
    assert str(ToolResult(output=42)) == "42"
    assert str(ToolResult()) == ""
    assert str(ToolFailure(error="bad")) == "Error: bad"
    assert str(CLIResult(output="$ ls")) == "$ ls"
    assert not ToolResult() and ToolResult(system="s")


def test_tool_result_add_and_replace():
    combined = ToolResult(output="a", system="s") + ToolResult(output="b", error="e")
    assert (combined.output, combined.error, combined.system) == ("ab", "e", "s")
    with pytest.raises(ValueError):
        ToolResult(base64_image="x") + ToolResult(base64_image="y")
    assert ToolResult(output="a").replace(output="b").output == "b"


def test_to_param_shape():
    assert Adder().to_param() == {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two integers.",
            "parameters": Adder().parameters,
        },
    }


async def test_collection_execute_paths():
    tools = ToolCollection(Adder())
    added = await tools.execute(name="add", tool_input={"a": 1, "b": 2})
    assert added == ToolResult(output={"sum": 3}) and not added.failed
    unknown = await tools.execute(name="mul", tool_input={})
    assert unknown.failed and unknown.error == "Unknown tool 'mul'. Available tools: add."
    missing = await tools.execute(name="add", tool_input={"a": 1})
    assert "- b: missing required argument; expected integer" in missing.error
    extra = await tools.execute(name="add", tool_input={"a": 1, "b": 2, "c": 3})
    assert "Invalid arguments for tool 'add'" in extra.error
    told = await tools.execute(name="add", tool_input={"a": -1, "b": 2})
    assert told.error == "a must not be negative"
    crashed = await tools.execute(name="add", tool_input={"a": 13, "b": 2})
    assert crashed.error == "Tool 'add' failed: KeyError: 'unlucky'"


async def test_collection_management():
    tools = ToolCollection(Adder(), Terminate())
    assert [t.name for t in tools] == ["add", "terminate"] and len(tools) == 2
    tools.add_tool(Adder(description="another"))  # duplicate name: kept the first
    assert tools.get_tool("add").description == "Add two integers."
    assert [p["function"]["name"] for p in tools.to_params()] == ["add", "terminate"]
    assert tools.remove_tool("add") is not None and "add" not in tools
    results = await ToolCollection(Terminate()).execute_all()
    assert str(results[0]).endswith("status: success")


async def test_terminate_schema_and_result():
    term = Terminate()
    assert term.parameters["properties"]["status"]["enum"] == ["success", "failure"]
    assert await term.execute(status="failure") == (
        "The interaction has been completed with status: failure"
    )


async def test_create_chat_completion_str_and_model():
    plain = CreateChatCompletion()
    assert plain.parameters["required"] == ["response"]
    assert plain.parameters["properties"]["response"]["type"] == "string"
    assert await plain.execute(response="hello") == "hello"

    class Answer(BaseModel):
        city: str
        population: int

    structured = CreateChatCompletion(Answer)
    assert set(structured.parameters["properties"]) == {"city", "population"}
    answer = await structured.execute(city="Paris", population=2)
    assert answer == Answer(city="Paris", population=2)
    with pytest.raises(ToolError, match="does not match"):
        await structured.execute(city="Paris", population="many")

    ints = CreateChatCompletion(list[int])
    assert ints.parameters["properties"]["response"]["type"] == "array"
    assert await ints.execute(response=[1, "2"]) == [1, 2]
