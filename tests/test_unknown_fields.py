"""Agents, tools and flows refuse unknown keyword arguments (a typo must not be kept as a
stray attribute while the real field keeps its default), and still take every keyword
upstream's code passes them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import Field, PrivateAttr, ValidationError
from pydantic_core import ErrorDetails

from app.agent import Manus, MCPAgent, ToolCallAgent
from app.agent.sandbox_agent import SandboxManus
from app.flow import FlowFactory, FlowType, PlanningFlow
from app.schema import ToolChoice
from app.testing import call, text, tool_calls
from app.tool import PythonExecute, Terminate
from app.tool.base import BaseTool
from app.tool.chart import DataVisualization
from app.tool.planning import PlanningTool
from app.tool.tool_collection import ToolCollection


def only_error(excinfo: pytest.ExceptionInfo[ValidationError]) -> ErrorDetails:
    errors = excinfo.value.errors()
    assert len(errors) == 1, errors
    return errors[0]


def test_agent_typo_is_refused_with_a_hint(make_llm) -> None:
    with pytest.raises(ValidationError) as excinfo:
        ToolCallAgent(llm=make_llm(), max_step=3)
    error = only_error(excinfo)
    assert error["type"] == "extra_forbidden" and error["loc"] == ("max_step",)
    assert error["msg"] == "Unknown field 'max_step' for ToolCallAgent; did you mean 'max_steps'?"
    assert "max_step" in str(excinfo.value) and "ToolCallAgent" in excinfo.value.title


def test_tool_typo_is_refused_with_a_hint(tmp_path: Path) -> None:
    with pytest.raises(ValidationError) as excinfo:
        PythonExecute(workspace=tmp_path, default_timout=5)
    error = only_error(excinfo)
    assert error["type"] == "extra_forbidden" and error["loc"] == ("default_timout",)
    assert "did you mean 'default_timeout'?" in error["msg"]


def test_flow_typo_is_refused_with_a_hint(make_llm) -> None:
    agent = ToolCallAgent(llm=make_llm())
    with pytest.raises(ValidationError) as excinfo:
        PlanningFlow(agent, llm=make_llm(), max_replan=0)
    assert "did you mean 'max_replans'?" in only_error(excinfo)["msg"]
    with pytest.raises(ValidationError) as excinfo:
        FlowFactory.create_flow(FlowType.PLANNING, agent, llm=make_llm(), step_timout=5)
    assert "did you mean 'step_timeout'?" in only_error(excinfo)["msg"]


def test_an_unlike_name_gets_no_guess_and_other_errors_are_kept(make_llm) -> None:
    with pytest.raises(ValidationError) as excinfo:
        ToolCallAgent(llm=make_llm(), max_steps="many", colour="blue")
    errors = {e["loc"]: e for e in excinfo.value.errors()}
    assert errors[("colour",)]["msg"] == "Unknown field 'colour' for ToolCallAgent"
    assert errors[("max_steps",)]["type"] == "int_parsing"  # the real error is not hidden


def test_assigning_an_undeclared_attribute_is_refused(make_llm) -> None:
    agent = ToolCallAgent(llm=make_llm())
    with pytest.raises(ValueError, match='no field "max_step"'):
        agent.max_step = 3  # type: ignore[attr-defined]
    assert agent.max_steps == 30
    with pytest.raises(ValueError, match="no field"):
        Terminate().statuz = "x"  # type: ignore[attr-defined]


def test_subclasses_declare_their_state(make_llm) -> None:
    """A user's subclass keeps its state in fields or private attributes, as upstream's do."""

    class Counting(ToolCallAgent):
        label: str = "counting"
        _calls: int = PrivateAttr(default=0)

        def bump(self) -> int:
            self._calls += 1
            self.label = f"counted {self._calls}"
            return self._calls

    agent = Counting(llm=make_llm(), label="mine", max_steps=4)
    assert (agent.label, agent.max_steps, agent.bump(), agent.label) == (
        "mine",
        4,
        1,
        "counted 1",
    )

    class Echo(BaseTool):
        name: str = "echo"
        description: str = "Echoes."
        prefix: str = Field(default=">")

        async def execute(self, **kwargs: Any) -> str:
            return self.prefix + str(kwargs)

    assert Echo(prefix="#").prefix == "#"
    with pytest.raises(ValidationError, match="did you mean 'prefix'"):
        Echo(prefx="#")  # type: ignore[call-arg]


def test_upstream_agent_and_tool_keywords_still_work(make_llm, tmp_path: Path) -> None:
    tools = ToolCollection(Terminate())
    agent = ToolCallAgent(
        llm=make_llm(),
        name="worker",
        description="does things",
        system_prompt="sys",
        next_step_prompt="next",
        max_steps=7,
        max_observe=500,
        duplicate_threshold=3,
        available_tools=tools,
        tool_choices=ToolChoice.REQUIRED,
        special_tool_names=["terminate"],
        tool_calls=[],
    )
    assert (agent.name, agent.max_steps, agent.max_observe, agent.duplicate_threshold) == (
        "worker",
        7,
        500,
        3,
    )
    assert agent.available_tools is tools and agent.tool_choices == ToolChoice.REQUIRED
    mcp = MCPAgent(llm=make_llm(), connection_type="sse", tool_schemas={"a": {}})
    assert mcp.connection_type == "sse" and mcp.tool_schemas == {"a": {}}
    manus = Manus(llm=make_llm(), workspace=tmp_path, connected_servers={}, max_observe=100)
    assert manus.max_observe == 100
    # Upstream's fields that our versions do not need are still accepted.
    assert SandboxManus.model_fields["sandbox_link"].default_factory is dict
    sentinel = make_llm()
    assert DataVisualization(llm=sentinel, workspace=tmp_path).llm is sentinel


async def test_upstream_planning_flow_keywords_still_work(llm_server, make_llm, tmp_path) -> None:
    """``PlanningFlow(agents, llm=, planning_tool=, executors=, plan_id=, primary_agent_key=)``
    as upstream's code builds it, through a whole run."""
    first = ToolCallAgent(llm=make_llm(), name="first")
    second = ToolCallAgent(llm=make_llm(), name="second")
    planning = PlanningTool()
    flow = PlanningFlow(
        {"a": first, "b": second},
        llm=make_llm(),
        planning_tool=planning,
        executors=["b"],
        plan_id="upstream_plan",
        primary_agent_key="b",
        tools=[],
    )
    assert flow.executor_keys == ["b"] and flow.active_plan_id == "upstream_plan"
    assert flow.primary_agent is second and flow.planning_tool is planning
    again = PlanningFlow([first], llm=make_llm(), executor_keys=["agent_0"])
    assert again.executor_keys == ["agent_0"] and again.agents == {"agent_0": first}

    llm_server.push(
        tool_calls(
            call("planning", {"command": "create", "title": "T", "steps": ["Say hi"]}),
        ),
        tool_calls(call("terminate", {"status": "success"}), content="hi"),
        text("Said hi."),
    )
    result = await flow.execute("Say hi")
    assert result.ok and result.plan_id == "upstream_plan"
    assert planning.plans["upstream_plan"]["step_statuses"] == ["completed"]
    assert [step.agent for step in result.steps] == ["second"]
