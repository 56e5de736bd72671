"""PlanningFlow end to end on the scripted server: real agents, real tools, real files."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from app.agent import DataAnalysis, Manus
from app.events import Event, PlanChanged
from app.flow import FlowFactory, FlowResult, FlowType, PlanningFlow
from app.prompt.planning import DEFAULT_PLAN_STEPS
from app.testing import call, error, slow, text, tool_calls

MANUS_MARK = "You are OpenManus"
ANALYST_MARK = "You are a data analyst"


def system_of(request) -> str:
    return request.body["messages"][0]["content"]


def last_user(request) -> str:
    return [m for m in request.body["messages"] if m["role"] == "user"][-1]["content"]


def step_prompt(request) -> str:
    """The flow's prompt for the step this request works on (the last one in the memory)."""
    return [
        m["content"]
        for m in request.body["messages"]
        if m["role"] == "user" and "Your job now is step" in m["content"]
    ][-1]


def plan_call(*steps: str, title: str = "The plan"):
    return tool_calls(
        call(
            "planning",
            {"command": "create", "plan_id": "model_choice", "title": title, "steps": list(steps)},
        )
    )


class Recorder:
    """The flow's plan changes, as its event bus delivers them (agents' events left out)."""

    def __init__(self) -> None:
        self.events: list[PlanChanged] = []

    async def __call__(self, event: Event) -> None:  # async listeners are awaited
        if isinstance(event, PlanChanged):
            self.events.append(event)

    def trail(self) -> list[tuple]:
        return [(e.change, e.step_index, e.status) for e in self.events]


def watched(flow: PlanningFlow) -> Recorder:
    recorder = Recorder()
    flow.events.subscribe(recorder)
    return recorder


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


def make_flow(
    make_llm, workspace: Path, *, analyst: bool = False, manus_steps: int = 20, **kwargs
) -> PlanningFlow:
    agents = {"manus": Manus(llm=make_llm(), workspace=workspace, max_steps=manus_steps)}
    if analyst:
        agents["data_analysis"] = DataAnalysis(llm=make_llm(), workspace=workspace)
    flow = FlowFactory.create_flow(FlowType.PLANNING, agents, llm=make_llm(), **kwargs)
    assert isinstance(flow, PlanningFlow)
    return flow


async def test_two_agent_plan_runs_each_step_on_its_tagged_agent(llm_server, make_llm, workspace):
    pytest.importorskip("matplotlib")  # the data agent draws a chart (the data extra)
    llm_server.push(
        plan_call(
            "[MANUS] Write sales.csv with the monthly revenue",
            "[DATA_ANALYSIS] Draw a bar chart of sales.csv",
            title="Sales chart",
        ),
        tool_calls(
            call(
                "str_replace_editor",
                {
                    "command": "create",
                    "path": "sales.csv",
                    "file_text": "month,revenue\nJan,120\nFeb,150\nMar,90\n",
                },
            )
        ),
        tool_calls(call("terminate", {"status": "success"}), content="Wrote sales.csv (3 rows)"),
        tool_calls(
            call(
                "data_visualization",
                {"charts": [{"chartTitle": "Revenue", "csvFilePath": "sales.csv"}]},
            )
        ),
        tool_calls(
            call("terminate", {"status": "success"}),
            content="Chart saved as visualization/Revenue.png",
        ),
        text("Revenue chart made from sales.csv."),
    )
    flow = make_flow(make_llm, workspace, analyst=True)
    recorder = watched(flow)
    result = await flow.execute("Chart our monthly revenue")

    assert isinstance(result, FlowResult) and result.ok, result
    assert result.summary == "Revenue chart made from sales.csv."
    assert (workspace / "visualization" / "Revenue.png").read_bytes()[:4] == b"\x89PNG"
    assert result.plan["step_statuses"] == ["completed", "completed"]
    assert result.plan["step_notes"] == [
        "Wrote sales.csv (3 rows)",
        "Chart saved as visualization/Revenue.png",
    ]
    assert [s.agent for s in result.steps] == ["Manus", "Data_Analysis"]
    assert str(result).endswith("Revenue chart made from sales.csv.")

    reqs = llm_server.requests
    assert len(reqs) == 6
    # One planning call offering only the planning tool, naming the agents and their tags.
    assert [t["function"]["name"] for t in reqs[0].body["tools"]] == ["planning"]
    planning_prompt = last_user(reqs[0])
    assert "Chart our monthly revenue" in planning_prompt
    assert "[MANUS] (Manus)" in planning_prompt and "[DATA_ANALYSIS] (Data_Analysis)" in (
        planning_prompt
    )
    # Steps went to the tagged agents.
    assert [MANUS_MARK in system_of(r) for r in reqs[1:3]] == [True, True]
    assert [ANALYST_MARK in system_of(r) for r in reqs[3:5]] == [True, True]
    # The analyst's step prompt carries the plan status and the first step's result.
    prompt = step_prompt(reqs[3])
    assert "Your job now is step 1: [DATA_ANALYSIS] Draw a bar chart" in prompt
    assert "0. [✓] [MANUS] Write sales.csv" in prompt
    assert "Notes: Wrote sales.csv (3 rows)" in prompt
    assert "1. [→] [DATA_ANALYSIS] Draw a bar chart" in prompt
    # The summary request saw the finished plan.
    assert "Progress: 2/2 steps completed (100.0%)" in last_user(reqs[5])
    # Live progress, in order.
    assert recorder.trail() == [
        ("plan_created", None, None),
        ("step_started", 0, "in_progress"),
        ("step_finished", 0, "completed"),
        ("step_started", 1, "in_progress"),
        ("step_finished", 1, "completed"),
        ("summary", None, None),
    ]
    assert recorder.events[0].plan_id == flow.active_plan_id != "model_choice"
    assert recorder.events[1].agent == "Manus" and recorder.events[3].agent == "Data_Analysis"
    assert recorder.events[-1].note == result.summary
    assert all(e.source == "flow" and e.total_steps == 2 for e in recorder.events)
    assert recorder.events[0].plan_text.startswith("Plan: Sales chart")
    assert "1. [✓] [DATA_ANALYSIS]" in recorder.events[-1].plan_text


async def test_failed_step_is_blocked_and_the_flow_still_finishes(llm_server, make_llm, workspace):
    llm_server.push(
        plan_call("[MANUS] Fetch the numbers", "[MANUS] Write the report"),
        error(401, "Incorrect API key provided"),  # step 0: the agent's LLM call fails
        text("The plan can stay as it is."),  # replanning: no change
        text("Report written."),  # step 1 completes
        text("Step 0 failed; the report was written without fresh numbers."),
    )
    flow = make_flow(make_llm, workspace)
    result = await flow.execute("Make the report")

    assert not result.ok and result.error is None and not result.timed_out
    assert result.plan["step_statuses"] == ["blocked", "completed"]
    assert result.plan["step_notes"][0].startswith("failed: ")
    assert "api_key" in result.plan["step_notes"][0]
    assert result.summary == "Step 0 failed; the report was written without fresh numbers."
    assert len(llm_server.requests) == 5  # nothing retried forever
    replan = last_user(llm_server.requests[2])
    assert "Step 0 of the plan could not be completed: failed:" in replan
    assert "0. [!] [MANUS] Fetch the numbers" in replan
    assert "Status: 0 completed, 1 in progress, 1 blocked, 0 not started" in (
        step_prompt(llm_server.requests[3])
    )
    assert "Status: 1 completed, 0 in progress, 1 blocked, 0 not started" in (
        last_user(llm_server.requests[4])
    )


@pytest.mark.e2e
async def test_exhausted_step_is_replanned_and_next_step_gets_a_full_budget(
    llm_server, make_llm, workspace
):
    busy = [tool_calls(call("bash", {"command": f"echo try {i}"})) for i in range(2)]
    llm_server.push(
        plan_call("[MANUS] Do it the hard way", "[MANUS] Report"),
        *busy,  # step 0 uses both of its 2 steps without finishing
        tool_calls(
            call(
                "planning",
                {
                    "command": "update",
                    "plan_id": "ignored",
                    "steps": [
                        "[MANUS] Do it the hard way",
                        "[MANUS] Do it the easy way",
                        "[MANUS] Report",
                    ],
                },
            )
        ),
        tool_calls(call("bash", {"command": "echo easy"})),  # step 1 needs both steps again
        tool_calls(call("terminate", {"status": "success"}), content="easy way worked"),
        text("Reported."),
        text("Done the easy way."),
    )
    flow = make_flow(make_llm, workspace, manus_steps=2)
    recorder = watched(flow)
    result = await flow.execute("Do the thing")

    assert result.plan["steps"] == [
        "[MANUS] Do it the hard way",
        "[MANUS] Do it the easy way",
        "[MANUS] Report",
    ]
    assert result.plan["step_statuses"] == ["blocked", "completed", "completed"]
    assert result.plan["step_notes"][0] == "stopped after 2 steps without finishing"
    assert [s.steps_used for s in result.steps] == [2, 2, 1]
    assert ("plan_updated", None, None) in recorder.trail()
    assert len(llm_server.requests) == 8


async def test_terminate_with_failure_blocks_the_step(llm_server, make_llm, workspace):
    llm_server.push(
        plan_call("[MANUS] Impossible thing"),
        tool_calls(call("terminate", {"status": "failure"}), content="No access to the data"),
        text("keep"),
        text("Could not be done."),
    )
    result = await make_flow(make_llm, workspace).execute("Try")
    assert result.plan["step_statuses"] == ["blocked"]
    assert result.plan["step_notes"] == ["the agent gave up: No access to the data"]


async def test_no_plan_from_the_model_falls_back_to_the_default_plan(
    llm_server, make_llm, workspace
):
    llm_server.push(
        text("Sure, I can help with that."),  # no planning call at all
        text("understood"),
        text("did it"),
        text("checked"),
        text("All three steps done."),
    )
    result = await make_flow(make_llm, workspace).execute("Tidy the notes folder")
    assert result.plan["steps"] == list(DEFAULT_PLAN_STEPS)
    assert result.plan["title"] == "Plan for: Tidy the notes folder"
    assert result.ok and result.summary == "All three steps done."
    assert "Your job now is step 2: Check the result" in step_prompt(llm_server.requests[3])


async def test_unusable_plan_falls_back_to_the_default_plan(llm_server, make_llm, workspace):
    llm_server.push(
        tool_calls(call("planning", {"command": "create", "title": "Empty", "steps": []})),
        text("a"),
        text("b"),
        text("c"),
        text("summary"),
    )
    result = await make_flow(make_llm, workspace).execute("x")
    assert result.plan["steps"] == list(DEFAULT_PLAN_STEPS) and result.ok


async def test_a_plan_of_the_wrong_shape_is_checked_against_the_schema(
    llm_server, make_llm, workspace
):
    """Steps that are not strings: the planner's call is checked like any tool call, so the
    flow falls back instead of storing a plan of numbers."""
    llm_server.push(
        tool_calls(call("planning", {"command": "create", "title": "Odd", "steps": [1, 2]})),
        text("a"),
        text("b"),
        text("c"),
        text("summary"),
    )
    result = await make_flow(make_llm, workspace).execute("x")
    assert result.plan["steps"] == list(DEFAULT_PLAN_STEPS) and result.ok


async def test_timeout_stops_a_flow_whose_agent_never_finishes(llm_server, make_llm, workspace):
    llm_server.push(
        plan_call("[MANUS] Wait forever", "[MANUS] Never reached"),
        slow(60, text("too late")),
    )
    flow = make_flow(make_llm, workspace, timeout=2.0)
    recorder = watched(flow)
    started = time.monotonic()
    result = await flow.execute("Hang")
    assert time.monotonic() - started < 15
    assert result.timed_out and not result.ok
    assert result.plan["step_statuses"] == ["blocked", "not_started"]
    assert result.plan["step_notes"][0] == "stopped: the flow's time limit (2 s) ran out"
    assert result.summary.startswith("The flow stopped after 2 s.")
    assert "step 1 (not_started): [MANUS] Never reached" in result.summary
    assert ("step_finished", 0, "blocked") in recorder.trail()
    assert len(llm_server.requests) == 2  # no summary call after the deadline


async def test_step_timeout_blocks_one_step_and_the_flow_goes_on(llm_server, make_llm, workspace):
    llm_server.push(
        plan_call("[MANUS] Slow step", "[MANUS] Quick step"),
        slow(60, text("too late")),
        text("fine as it is"),
        text("quick done"),
        text("One of two done."),
    )
    flow = make_flow(make_llm, workspace, step_timeout=0.5)
    result = await flow.execute("Two things")
    assert result.plan["step_statuses"] == ["blocked", "completed"]
    assert "step time limit (0.5 s)" in result.plan["step_notes"][0]
    assert result.summary == "One of two done."


async def test_cancel_leaves_the_running_step_to_carry_on(llm_server, make_llm, workspace):
    llm_server.push(plan_call("[MANUS] Long work"), slow(60, text("late")))
    flow = make_flow(make_llm, workspace)
    task = asyncio.create_task(flow.execute("Long"))
    assert await llm_server.wait_for_requests_async(2, timeout=10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    plan = flow.planning_tool.plans[flow.active_plan_id]
    assert plan["step_statuses"] == ["in_progress"]
    llm_server.push(text("done after all"), text("All done."))
    result = await flow.execute("")  # carries the cut-off step on, without a new step prompt
    assert result.plan["step_statuses"] == ["completed"]
    asked = [m for m in llm_server.requests[-2].messages if m["role"] == "user"]
    assert len([m for m in asked if "Your job now is step" in m["content"]]) == 1


async def test_llm_failure_while_planning_ends_with_an_error(llm_server, make_llm, workspace):
    llm_server.push(error(401, "Incorrect API key provided"))
    result = await make_flow(make_llm, workspace).execute("x")
    assert result.error is not None and not result.ok
    assert result.summary.startswith("The flow stopped:") and result.plan == {}


async def test_summary_falls_back_when_the_model_cannot_be_reached(llm_server, make_llm, workspace):
    llm_server.push(plan_call("[MANUS] One"), text("done one"), error(401, "bad key"))
    result = await make_flow(make_llm, workspace).execute("x")
    assert result.ok
    assert result.summary == "Plan 'The plan': 1 of 1 steps completed."


async def test_executor_choice_by_key_name_and_fallback(make_llm, workspace):
    manus = Manus(llm=make_llm(), workspace=workspace)
    analyst = DataAnalysis(llm=make_llm(), workspace=workspace)
    flow = PlanningFlow({"manus": manus, "data_analysis": analyst}, llm=make_llm())
    assert flow.get_executor("DATA_ANALYSIS") is analyst
    assert flow.get_executor("Data_Analysis") is analyst  # the agent's own name
    assert flow.get_executor("data-analysis") is analyst
    assert flow.get_executor("WEB_SEARCH") is manus  # unknown tag: first executor
    assert flow.get_executor(None) is manus
    assert flow.step_tag("[DATA_ANALYSIS] chart it") == "DATA_ANALYSIS"
    assert flow.step_tag("no tag here") is None
    only_analyst = PlanningFlow(
        {"manus": manus, "data_analysis": analyst},
        llm=make_llm(),
        executors=["data_analysis"],
        plan_id="p",
    )
    assert only_analyst.get_executor(None) is analyst and only_analyst.active_plan_id == "p"


async def test_flow_construction_forms(make_llm, workspace):
    a = Manus(llm=make_llm(), workspace=workspace)
    b = Manus(llm=make_llm(), workspace=workspace)
    single = PlanningFlow(a, llm=make_llm())
    assert list(single.agents) == ["default"] and single.primary_agent is a
    listed = FlowFactory.create_flow("planning", [a, b], llm=make_llm())
    assert list(listed.agents) == ["agent_0", "agent_1"] and listed.primary_agent is a
    keyed = PlanningFlow({"x": a, "y": b}, primary_agent_key="y", llm=make_llm())
    assert keyed.primary_agent is b and keyed.get_agent("x") is a
    with pytest.raises(ValueError, match="Unknown flow type 'chaos'"):
        FlowFactory.create_flow("chaos", a)
    with pytest.raises(ValueError, match="primary_agent_key 'z'"):
        PlanningFlow({"x": a}, primary_agent_key="z", llm=make_llm())
    with pytest.raises(ValueError, match="unknown agents: z"):
        PlanningFlow({"x": a}, executors=["z"], llm=make_llm())
    with pytest.raises(ValueError, match="needs a request"):
        await single.execute("  ")


async def test_running_again_makes_a_new_plan(llm_server, make_llm, workspace):
    llm_server.push(
        plan_call("[MANUS] one"),
        text("ok"),
        text("s1"),
        plan_call("[MANUS] two"),
        text("ok"),
        text("s2"),
    )
    flow = make_flow(make_llm, workspace)
    first = await flow.execute("first")
    second = await flow.execute("second")
    assert first.plan_id != second.plan_id and second.plan["steps"] == ["[MANUS] two"]
    assert len(flow.planning_tool.plans) == 2 and second.ok
