"""The planning tool: every command, its text output, and bad input as clear errors."""

from __future__ import annotations

import pytest

from app.exceptions import ToolError
from app.tool import PlanningTool, ToolCollection
from app.tool.base import ToolFailure

STEPS = ["Collect the data", "Clean it", "Draw the chart"]


@pytest.fixture
def tool() -> PlanningTool:
    return PlanningTool()


async def test_schema_matches_upstream(tool):
    params = tool.parameters
    assert tool.name == "planning" and params["required"] == ["command"]
    assert params["properties"]["command"]["enum"] == [
        "create",
        "update",
        "list",
        "get",
        "set_active",
        "mark_step",
        "delete",
    ]
    assert params["properties"]["step_status"]["enum"] == [
        "not_started",
        "in_progress",
        "completed",
        "blocked",
    ]
    assert params["properties"]["steps"] == {
        "type": "array",
        "items": {"type": "string"},
        "description": params["properties"]["steps"]["description"],
    }
    assert params["properties"]["step_index"]["type"] == "integer"


async def test_create_renders_the_plan_text(tool):
    result = await tool.execute(command="create", plan_id="p1", title="Sales report", steps=STEPS)
    assert result.output == (
        "Plan created successfully with ID: p1\n\n"
        "Plan: Sales report (ID: p1)\n"
        "===========================\n"
        "\n"
        "Progress: 0/3 steps completed (0.0%)\n"
        "Status: 0 completed, 0 in progress, 0 blocked, 3 not started\n"
        "\n"
        "Steps:\n"
        "0. [ ] Collect the data\n"
        "1. [ ] Clean it\n"
        "2. [ ] Draw the chart"
    )
    assert tool.current_plan_id == "p1"
    assert tool.plans["p1"] == {
        "plan_id": "p1",
        "title": "Sales report",
        "steps": STEPS,
        "step_statuses": ["not_started"] * 3,
        "step_notes": ["", "", ""],
    }


async def test_mark_step_uses_every_marker_and_notes(tool):
    await tool.execute(command="create", plan_id="p1", title="T", steps=[*STEPS, "Publish"])
    await tool.execute(
        command="mark_step", step_index=0, step_status="completed", step_notes="42 rows"
    )
    await tool.execute(command="mark_step", plan_id="p1", step_index=1, step_status="in_progress")
    result = await tool.execute(
        command="mark_step", step_index=2, step_status="blocked", step_notes="no plotting library"
    )
    text = result.output
    assert text.startswith("Step 2 updated in plan 'p1'.")
    assert "Progress: 1/4 steps completed (25.0%)" in text
    assert "Status: 1 completed, 1 in progress, 1 blocked, 1 not started" in text
    assert text.endswith(
        "Steps:\n"
        "0. [✓] Collect the data\n"
        "   Notes: 42 rows\n"
        "1. [→] Clean it\n"
        "2. [!] Draw the chart\n"
        "   Notes: no plotting library\n"
        "3. [ ] Publish"
    )
    # Notes alone leave the status as it is.
    await tool.execute(command="mark_step", step_index=1, step_notes="halfway")
    assert tool.plans["p1"]["step_statuses"][1] == "in_progress"
    assert tool.plans["p1"]["step_notes"][1] == "halfway"


async def test_update_keeps_progress_of_unchanged_steps(tool):
    await tool.execute(command="create", plan_id="p1", title="T", steps=STEPS)
    await tool.execute(
        command="mark_step", step_index=0, step_status="completed", step_notes="done"
    )
    await tool.execute(command="mark_step", step_index=1, step_status="blocked")
    result = await tool.execute(
        command="update",
        plan_id="p1",
        title="T2",
        steps=["Collect the data", "Clean it with pandas", "Draw the chart", "Write the report"],
    )
    plan = tool.plans["p1"]
    assert plan["title"] == "T2"
    assert plan["step_statuses"] == ["completed", "not_started", "not_started", "not_started"]
    assert plan["step_notes"] == ["done", "", "", ""]
    assert result.output.startswith("Plan updated successfully: p1\n\nPlan: T2 (ID: p1)")
    # A title-only update leaves the steps alone.
    await tool.execute(command="update", plan_id="p1", title="T3")
    assert plan["steps"][3] == "Write the report" and plan["title"] == "T3"


async def test_list_get_set_active_delete(tool):
    assert "No plans available" in (await tool.execute(command="list")).output
    await tool.execute(command="create", plan_id="a", title="First", steps=["x"])
    await tool.execute(command="create", plan_id="b", title="Second", steps=["y", "z"])
    await tool.execute(command="mark_step", plan_id="b", step_index=0, step_status="completed")
    listing = (await tool.execute(command="list")).output
    assert listing == (
        "Available plans:\n"
        "• a: First - 0/1 steps completed\n"
        "• b (active): Second - 1/2 steps completed"
    )
    assert (await tool.execute(command="get")).output.startswith("Plan: Second (ID: b)")
    assert (await tool.execute(command="get", plan_id="a")).output.startswith("Plan: First")
    await tool.execute(command="set_active", plan_id="a")
    assert tool.current_plan_id == "a"
    assert (await tool.execute(command="get")).output.startswith("Plan: First (ID: a)")
    assert (await tool.execute(command="delete", plan_id="a")).output == (
        "Plan 'a' has been deleted."
    )
    assert tool.current_plan_id is None and list(tool.plans) == ["b"]
    with pytest.raises(ToolError, match="No active plan"):
        await tool.execute(command="get")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"command": "get", "plan_id": "nope"}, "No plan with ID 'nope'. Known plans: p1"),
        ({"command": "update", "plan_id": "nope", "steps": ["a"]}, "No plan with ID 'nope'"),
        ({"command": "delete", "plan_id": "ghost"}, "No plan with ID 'ghost'"),
        ({"command": "set_active", "plan_id": "ghost"}, "No plan with ID 'ghost'"),
        ({"command": "create", "plan_id": "p2", "title": "T"}, "`steps` is required"),
        ({"command": "create", "plan_id": "p2", "title": "T", "steps": []}, "at least one step"),
        (
            {"command": "create", "plan_id": "p2", "title": "T", "steps": ["a", "  "]},
            "no step may be empty",
        ),
        ({"command": "create", "plan_id": "p2", "steps": ["a"]}, "`title` is required"),
        ({"command": "create", "title": "T", "steps": ["a"]}, "`plan_id` is required"),
        ({"command": "create", "plan_id": "p1", "title": "T", "steps": ["a"]}, "already exists"),
        ({"command": "update", "steps": ["a"]}, "`plan_id` is required for command `update`"),
        (
            {"command": "mark_step", "step_index": 2, "step_status": "completed"},
            "step_index 2 is out of range: plan 'p1' has 2 step\\(s\\), numbered 0 to 1",
        ),
        ({"command": "mark_step", "step_index": -1}, "out of range"),
        ({"command": "mark_step"}, "`step_index` is required"),
    ],
)
async def test_bad_input_is_a_clear_error(tool, kwargs, message):
    await tool.execute(command="create", plan_id="p1", title="T", steps=["a", "b"])
    before = {k: list(v) if isinstance(v, list) else v for k, v in tool.plans["p1"].items()}
    with pytest.raises(ToolError, match=message):
        await tool.execute(**kwargs)
    assert tool.plans["p1"] == before  # a failed command changes nothing


@pytest.mark.parametrize(
    ("arguments", "line"),
    [
        (
            {"command": "create", "plan_id": "p2", "title": "T", "steps": "do it"},
            '- steps: expected array of string, got string "do it"',
        ),
        (
            {"command": "mark_step", "step_index": "first"},
            '- step_index: expected integer, got string "first"',
        ),
        (
            {"command": "mark_step", "step_index": 0, "step_status": "done"},
            '- step_status: expected one of "not_started", "in_progress", "completed", '
            '"blocked", got string "done"',
        ),
        (
            {"command": "rename"},
            '- command: expected one of "create", "update", "list", "get", "set_active", '
            '"mark_step", "delete", got string "rename"',
        ),
        (
            {"command": "get", "colour": "red"},
            "- colour: unknown argument (allowed: command, plan_id, title, steps, step_index, "
            "step_status, step_notes)",
        ),
    ],
)
async def test_arguments_of_the_wrong_kind_are_refused_before_the_call(tool, arguments, line):
    """Types, names and unknown arguments are the Args model's job: the model gets an error
    naming the field, and nothing changes."""
    await tool.execute(command="create", plan_id="p1", title="T", steps=["a", "b"])
    before = {k: list(v) if isinstance(v, list) else v for k, v in tool.plans["p1"].items()}
    result = await ToolCollection(tool).execute(name="planning", tool_input=arguments)
    assert isinstance(result, ToolFailure)
    assert result.error.splitlines()[1:] == [line]
    assert tool.plans["p1"] == before


async def test_errors_reach_the_model_as_failures(tool):
    """Through a ToolCollection (as an agent calls it) errors become results, not crashes."""
    tools = ToolCollection(tool)
    result = await tools.execute(name="planning", tool_input={"command": "get"})
    assert isinstance(result, ToolFailure) and "No active plan" in result.error
    missing = await tools.execute(name="planning", tool_input={"plan_id": "x"})
    assert isinstance(missing, ToolFailure) and "command" in missing.error
    ok = await tools.execute(
        name="planning",
        tool_input={"command": "create", "plan_id": "x", "title": "T", "steps": ["a"]},
    )
    assert not isinstance(ok, ToolFailure) and "Plan: T (ID: x)" in str(ok)


async def test_step_index_as_digit_string_is_accepted(tool):
    """Some models send integers as strings; a clean digit string is understood (the Args
    model converts it before the call)."""
    await tool.execute(command="create", plan_id="p", title="T", steps=["a", "b"])
    marked = await ToolCollection(tool).execute(
        name="planning",
        tool_input={"command": "mark_step", "step_index": " 1 ", "step_status": "completed"},
    )
    assert not isinstance(marked, ToolFailure), marked
    assert tool.plans["p"]["step_statuses"] == ["not_started", "completed"]
