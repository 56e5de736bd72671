"""Batch tasks that run a planning flow: the flow's summary is the answer, and a plan that
does not complete is a failed task."""

from __future__ import annotations

from pathlib import Path

from app.batch import BatchOptions, read_results, run_batch
from app.config import AppConfig, config
from app.testing import ScriptedLLMServer, call, error, text, tool_calls
from tests.batch_helpers import write_tasks
from tests.conftest import llm_settings


def plan(*steps: str):
    return tool_calls(
        call(
            "planning", {"command": "create", "plan_id": "p", "title": "Plan", "steps": list(steps)}
        )
    )


async def test_flow_tasks_report_summary_and_blocked_plans(tmp_path: Path):
    script = [
        # task 1: a one-step plan that completes
        plan("Say hello"),
        text("hello done"),
        text("Summary: said hello."),
        # task 2: the step's agent hits an auth error -> blocked; no replan offered a fix
        plan("Do the impossible"),
        error(401, "bad key"),
        text("no change"),  # the replan call after the blocked step: no revision
        text("Summary: could not do it."),
    ]
    with ScriptedLLMServer(script) as server:
        config.use(AppConfig(llm=llm_settings(server, max_retries=0), workspace_root=tmp_path))
        try:
            tasks = [
                {
                    "id": "f-ok",
                    "prompt": "Greet the user.",
                    "agent": "toolcall",
                    "flow": "planning",
                    "expected": "Summary: said hello.",
                },
                {
                    "id": "f-blocked",
                    "prompt": "Do something impossible.",
                    "agent": "toolcall",
                    "flow": "planning",
                },
            ]
            report = await run_batch(
                BatchOptions(
                    tasks=write_tasks(tmp_path / "tasks.jsonl", tasks),
                    output=tmp_path / "results.jsonl",
                    concurrency=1,
                )
            )
        finally:
            config.reset()
        assert server.errors == []
    results = read_results(tmp_path / "results.jsonl")
    assert report.summary.done == 1 and report.summary.failed == 1

    ok = results["f-ok"]
    assert (ok.state, ok.final_answer, ok.correct, ok.flow) == (
        "FINISHED",
        "Summary: said hello.",
        True,
        "planning",
    )
    assert ok.usage["requests"] == 3  # plan, step, summary: the flow's own LLM is counted

    blocked = results["f-blocked"]
    assert blocked.state == "ERROR" and blocked.status != "done"
    assert blocked.final_answer == "Summary: could not do it."
    assert "not completed: 0" in blocked.error
