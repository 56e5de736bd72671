"""Built-in tools declare their arguments once (a pydantic ``Args`` model): the schema the
model is offered is derived from it, and must stay exactly the schema each tool offered when
it was written by hand (upstream's names, types, enums, ``required`` lists and extra keywords
such as ``dependencies``, in this project's wording). Calls are checked by the same model.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any

import pytest
from pydantic import AfterValidator

from app.tool.ask_human import AskHuman
from app.tool.base import BaseTool, ToolResult
from app.tool.bash import Bash
from app.tool.browser_use_tool import BrowserUseTool
from app.tool.chart.tools import DataVisualization, VisualizationPrepare
from app.tool.crawl4ai import Crawl4aiTool
from app.tool.create_chat_completion import CreateChatCompletion
from app.tool.declared import FrozenSchema
from app.tool.function_tool import tool
from app.tool.planning import PlanningTool
from app.tool.python_execute import PythonExecute
from app.tool.str_replace_editor import StrReplaceEditor
from app.tool.terminate import Terminate
from app.tool.tool_collection import ToolCollection
from app.tool.web_search import WebSearch

TOOLS: dict[str, Callable[[], BaseTool]] = {
    "terminate": Terminate,
    "create_chat_completion": CreateChatCompletion,
    "python_execute": PythonExecute,
    "bash": Bash,
    "str_replace_editor": StrReplaceEditor,
    "ask_human": AskHuman,
    "planning": PlanningTool,
    "web_search": WebSearch,
    "browser_use": BrowserUseTool,
    "data_visualization": DataVisualization,
    "visualization_preparation": VisualizationPrepare,
    "crawl4ai": Crawl4aiTool,
}

#: The schemas as each tool wrote them by hand, before they were derived.
UPSTREAM: dict[str, dict[str, Any]] = {
    "terminate": {
        "type": "object",
        "properties": {
            "status": {
                "type": "string",
                "description": "Outcome of the task.",
                "enum": ["success", "failure"],
            }
        },
        "required": ["status"],
    },
    "create_chat_completion": {
        "type": "object",
        "properties": {"response": {"type": "string", "description": "The answer to return."}},
        "required": ["response"],
    },
    "python_execute": {
        "type": "object",
        "properties": {
            "code": {
                "type": "string",
                "description": "The Python source to run. Print whatever you want to see.",
            },
            "timeout": {
                "type": "integer",
                "description": "Seconds before the run is stopped (default 5).",
            },
        },
        "required": ["code"],
    },
    "bash": {
        "type": "object",
        "properties": {
            "command": {
                "type": "string",
                "description": "The shell command to run; several lines or `&&` chains are fine.",
            },
            "restart": {
                "type": "boolean",
                "description": "Kill the current shell and "
                "start a fresh one (in the "
                "workspace) before running "
                "`command`, which may then be "
                "empty.",
            },
        },
        "required": ["command"],
    },
    "str_replace_editor": {
        "type": "object",
        "properties": {
            "command": {
                "type": "string",
                "enum": ["view", "create", "str_replace", "insert", "undo_edit"],
                "description": "What to do: view, create, str_replace, insert or undo_edit.",
            },
            "path": {
                "type": "string",
                "description": "File or directory path, absolute or relative to the workspace.",
            },
            "file_text": {
                "type": "string",
                "description": "create only: the full content of the new file.",
            },
            "old_str": {
                "type": "string",
                "description": "str_replace only: the exact text to replace; must occur once.",
            },
            "new_str": {
                "type": "string",
                "description": "str_replace: "
                "the "
                "replacement "
                "(empty deletes "
                "old_str). "
                "insert: the "
                "text to "
                "insert.",
            },
            "insert_line": {
                "type": "integer",
                "description": "insert only: new_str goes after this line (0 = top of file).",
            },
            "view_range": {
                "type": "array",
                "items": {"type": "integer"},
                "description": "view only, "
                "on files: "
                "[start, "
                "end] line "
                "numbers, "
                "1-based and "
                "inclusive; "
                "end -1 "
                "means to "
                "the end of "
                "the file.",
            },
        },
        "required": ["command", "path"],
    },
    "ask_human": {
        "type": "object",
        "properties": {
            "inquire": {
                "type": "string",
                "description": "The question for the "
                "user, complete enough "
                "to answer without "
                "further context.",
            }
        },
        "required": ["inquire"],
    },
    "planning": {
        "type": "object",
        "properties": {
            "command": {
                "type": "string",
                "enum": ["create", "update", "list", "get", "set_active", "mark_step", "delete"],
                "description": "What to do.",
            },
            "plan_id": {
                "type": "string",
                "description": "The plan's identifier. "
                "Needed by create, "
                "update, set_active and "
                "delete; get and "
                "mark_step use the active "
                "plan without it.",
            },
            "title": {
                "type": "string",
                "description": "The plan's title (create; optional for update).",
            },
            "steps": {
                "type": "array",
                "items": {"type": "string"},
                "description": "The steps in order (create; optional for update).",
            },
            "step_index": {
                "type": "integer",
                "description": "Which step to mark, counting from 0 (mark_step).",
            },
            "step_status": {
                "type": "string",
                "enum": ["not_started", "in_progress", "completed", "blocked"],
                "description": "The step's new status (mark_step).",
            },
            "step_notes": {
                "type": "string",
                "description": "Notes to keep with the step (mark_step).",
            },
        },
        "required": ["command"],
        "additionalProperties": False,
    },
    "web_search": {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to search for."},
            "num_results": {
                "type": "integer",
                "description": "How many results to return (default 5).",
                "default": 5,
            },
            "lang": {
                "type": "string",
                "description": "Language code of the results (default from config, e.g. en).",
            },
            "country": {
                "type": "string",
                "description": "Country code of the results (default from config, e.g. us).",
            },
            "fetch_content": {
                "type": "boolean",
                "description": "Also fetch each result page and include its text.",
                "default": False,
            },
        },
        "required": ["query"],
    },
    "browser_use": {
        "type": "object",
        "properties": {
            "action": {
                "type": "string",
                "enum": [
                    "go_to_url",
                    "click_element",
                    "input_text",
                    "scroll_down",
                    "scroll_up",
                    "scroll_to_text",
                    "send_keys",
                    "get_dropdown_options",
                    "select_dropdown_option",
                    "go_back",
                    "refresh",
                    "web_search",
                    "wait",
                    "extract_content",
                    "switch_tab",
                    "open_tab",
                    "close_tab",
                ],
                "description": "The action to run.",
            },
            "url": {"type": "string", "description": "URL for 'go_to_url' or 'open_tab'."},
            "index": {
                "type": "integer",
                "description": "Element index for "
                "'click_element', "
                "'input_text', "
                "'get_dropdown_options' "
                "and "
                "'select_dropdown_option'.",
            },
            "text": {
                "type": "string",
                "description": "Text for 'input_text', "
                "'scroll_to_text' or "
                "'select_dropdown_option'.",
            },
            "scroll_amount": {
                "type": "integer",
                "description": "Pixels to "
                "scroll for "
                "'scroll_down' "
                "or 'scroll_up' "
                "(default: one "
                "screen).",
            },
            "tab_id": {"type": "integer", "description": "Tab number for 'switch_tab'."},
            "query": {"type": "string", "description": "Search query for 'web_search'."},
            "goal": {"type": "string", "description": "What to extract, for 'extract_content'."},
            "keys": {"type": "string", "description": "Keys to send for 'send_keys'."},
            "seconds": {"type": "integer", "description": "Seconds to wait for 'wait'."},
        },
        "required": ["action"],
        "dependencies": {
            "go_to_url": ["url"],
            "click_element": ["index"],
            "input_text": ["index", "text"],
            "scroll_down": [],
            "scroll_up": [],
            "scroll_to_text": ["text"],
            "send_keys": ["keys"],
            "get_dropdown_options": ["index"],
            "select_dropdown_option": ["index", "text"],
            "go_back": [],
            "refresh": [],
            "web_search": ["query"],
            "wait": [],
            "extract_content": ["goal"],
            "switch_tab": ["tab_id"],
            "open_tab": ["url"],
            "close_tab": [],
        },
    },
    "data_visualization": {
        "type": "object",
        "properties": {
            "json_path": {
                "type": "string",
                "description": "JSON file with a list of chart objects.",
            },
            "charts": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "chartTitle": {
                            "type": "string",
                            "description": "Title; also names the file.",
                        },
                        "csvFilePath": {
                            "type": "string",
                            "description": "CSV file (relative to workspace).",
                        },
                        "data": {
                            "type": "array",
                            "items": {"type": "object"},
                            "description": "Rows as objects, instead of a CSV file.",
                        },
                        "chartType": {
                            "type": "string",
                            "enum": ["auto", "line", "bar", "scatter", "pie", "area", "histogram"],
                        },
                        "x": {
                            "type": "string",
                            "description": "Column for the x axis or the labels.",
                        },
                        "y": {
                            "type": "array",
                            "items": {"type": "string"},
                            "description": "Value column(s); default: every other numeric column.",
                        },
                    },
                    "required": ["chartTitle"],
                },
                "description": "Chart objects given directly (instead of json_path).",
            },
            "output_type": {
                "type": "string",
                "enum": ["png", "html", "both"],
                "description": "png (default), html (a self-contained page) or both.",
            },
            "tool_type": {
                "type": "string",
                "enum": ["visualization", "insight"],
                "description": "insight also reports highs, lows and trends.",
            },
            "language": {
                "type": "string",
                "enum": ["en", "zh"],
                "description": "Language of the insights.",
            },
        },
    },
    "visualization_preparation": {
        "type": "object",
        "properties": {
            "code_type": {
                "type": "string",
                "enum": ["visualization", "insight"],
                "description": "What the charts are for; insight charts get observations.",
            },
            "code": {
                "type": "string",
                "description": "Python that writes the CSV file(s) and the chart JSON file.",
            },
            "timeout": {"type": "integer", "description": "Seconds (default 30)."},
        },
        "required": ["code"],
    },
    "crawl4ai": {
        "type": "object",
        "properties": {
            "urls": {
                "type": "array",
                "items": {"type": "string"},
                "description": "http(s) URLs to fetch (at most 10)",
            },
            "timeout": {"type": "integer", "description": "Seconds per page (default 30)"},
            "bypass_cache": {"type": "boolean", "description": "Accepted; pages are never cached"},
            "word_count_threshold": {
                "type": "integer",
                "description": "Drop text lines with fewer words than this (default 10)",
            },
        },
        "required": ["urls"],
    },
}


def _property_orders(node: Any) -> Any:
    """The order of every ``properties`` mapping (dict equality ignores it; a model reads it)."""
    if isinstance(node, dict):
        own = list(node["properties"]) if isinstance(node.get("properties"), dict) else None
        return [own, {k: _property_orders(v) for k, v in node.items()}]
    if isinstance(node, list):
        return [_property_orders(item) for item in node]
    return None


def test_every_built_in_tool_is_covered() -> None:
    assert set(TOOLS) == set(UPSTREAM)


@pytest.mark.parametrize("name", list(UPSTREAM))
def test_derived_schema_equals_upstream(name: str) -> None:
    tool = TOOLS[name]()
    assert tool.name == name
    derived = tool.to_param()["function"]["parameters"]
    assert derived == UPSTREAM[name]
    assert _property_orders(derived) == _property_orders(UPSTREAM[name])
    assert json.loads(json.dumps(derived)) == UPSTREAM[name]  # what goes over the wire
    assert tool.parameters is derived


@pytest.mark.parametrize("name", [n for n in UPSTREAM if n != "create_chat_completion"])
def test_schema_is_built_once_per_class_and_read_only(name: str) -> None:
    first, second = TOOLS[name](), TOOLS[name]()
    assert first.Args is not None
    assert first.parameters is second.parameters  # derived once, shared by every instance
    assert isinstance(first.parameters, FrozenSchema)
    with pytest.raises(TypeError, match="assign a new dict"):
        first.parameters["properties"].pop(next(iter(first.parameters["properties"])))
    assert first.parameters == UPSTREAM[name]


#: For each tool: arguments that do not fit, and the lines of the error the model gets back.
INVALID: list[tuple[str, dict[str, Any], list[str]]] = [
    (
        "terminate",
        {"status": "done"},
        ['- status: expected one of "success", "failure", got string "done"'],
    ),
    (
        "create_chat_completion",
        {"answer": "x"},
        [
            "- response: missing required argument; expected string",
            "- answer: unknown argument (allowed: response)",
        ],
    ),
    (
        "python_execute",
        {"code": "print(1)", "timeout": "soon"},
        ['- timeout: expected integer, got string "soon"'],
    ),
    ("bash", {"command": 7}, ["- command: expected string, got integer 7"]),
    (
        "str_replace_editor",
        {"command": "delete", "path": "a"},
        [
            '- command: expected one of "view", "create", "str_replace", "insert", '
            '"undo_edit", got string "delete"'
        ],
    ),
    ("ask_human", {}, ["- inquire: missing required argument; expected string"]),
    (
        "planning",
        {"command": "create", "steps": ["a", 2]},
        ["- steps[1]: expected string, got integer 2"],
    ),
    (
        "web_search",
        {"query": "q", "num_results": "many"},
        ['- num_results: expected integer, got string "many"'],
    ),
    (
        "browser_use",
        {"action": "go_to_url", "index": 1.5},
        ["- index: expected integer, got number 1.5"],
    ),
    (
        "data_visualization",
        {"charts": [{"chartTitle": "t", "chartType": "radar"}]},
        [
            '- charts[0].chartType: expected one of "auto", "line", "bar", "scatter", '
            '"pie", "area", "histogram", got string "radar"'
        ],
    ),
    (
        "visualization_preparation",
        {"code": ["print(1)"]},
        ["- code: expected string, got an array of 1 item"],
    ),
    ("crawl4ai", {"urls": "not json"}, ['- urls: expected array of string, got string "not json"']),
]


def test_every_tool_has_an_invalid_call() -> None:
    assert {name for name, _, _ in INVALID} == set(UPSTREAM)


@pytest.mark.parametrize(("name", "arguments", "lines"), INVALID, ids=[n for n, _, _ in INVALID])
async def test_invalid_arguments_go_back_to_the_model_naming_the_field(
    name: str, arguments: dict[str, Any], lines: list[str]
) -> None:
    tool = TOOLS[name]()
    result = await ToolCollection(tool).execute(name=name, tool_input=arguments)
    assert result.failed
    first, *problems = (result.error or "").splitlines()
    assert first.startswith(f"Invalid arguments for tool '{name}' (it was not run)")
    assert problems == lines


async def test_arguments_reach_execute_checked_and_converted() -> None:
    """What the model sends as text the schema allows (``"3"``, JSON in a string, ``null``
    for an optional argument) arrives converted; the tool runs with the model's values."""
    planning = PlanningTool()
    tools = ToolCollection(planning)
    created = await tools.execute(
        name="planning",
        tool_input={"command": "create", "plan_id": "p", "title": "T", "steps": '["a", "b"]'},
    )
    assert not created.failed, created
    marked = await tools.execute(
        name="planning",
        tool_input={
            "command": "mark_step",
            "step_index": "1",
            "step_status": "completed",
            "step_notes": None,
        },
    )
    assert not marked.failed, marked
    assert planning.plans["p"]["steps"] == ["a", "b"]
    assert planning.plans["p"]["step_statuses"] == ["not_started", "completed"]
    unknown = await tools.execute(name="planning", tool_input={"command": "list", "verbose": True})
    assert unknown.failed
    assert "- verbose: unknown argument (allowed: command, plan_id, title" in (unknown.error or "")


def test_an_outside_schema_is_still_checked_by_the_schema_validator() -> None:
    """A tool that writes ``parameters`` by hand (as MCP tools get theirs from a server), or
    replaces a derived one, is checked against that dict."""
    planning = PlanningTool()
    planning.parameters = {"type": "object", "properties": {"command": {"type": "integer"}}}
    with pytest.raises(Exception, match="command: expected integer"):
        planning.validate_arguments({"command": "list"})


def _not_blank(text: str) -> str:
    if not text.strip():
        raise ValueError("must not be blank")
    return text


@tool
def shout(text: Annotated[str, AfterValidator(_not_blank)]) -> str:
    """Shout a text.

    Args:
        text: What to shout.
    """
    return text.upper()


async def test_a_function_tool_is_checked_by_its_own_model() -> None:
    """Python-only rules of the signature (a validator no JSON schema can carry) are applied
    before the call: the arguments go through the signature's pydantic model."""
    assert shout.parameters == {
        "type": "object",
        "properties": {"text": {"type": "string", "description": "What to shout."}},
        "required": ["text"],
        "additionalProperties": False,
    }
    tools = ToolCollection(shout)
    blank = await tools.execute(name="shout", tool_input={"text": "  "})
    assert blank.failed
    assert (blank.error or "").splitlines()[1:] == ["- text: must not be blank"]
    assert await tools.execute(name="shout", tool_input={"text": "hi"}) == ToolResult(output="HI")
