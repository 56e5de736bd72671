"""run_flow.py as a real program: a subprocess against the scripted LLM server."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from app.testing import call, error, slow, text, tool_calls
from tests.test_main_e2e import as_from_a_terminal, child_env, run_program, write_config

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent
RUN_FLOW = ROOT / "run_flow.py"


def run_flow(tmp_path: Path, *args: str, stdin: str | None = None, timeout: float = 90):
    return run_program(RUN_FLOW, tmp_path, *args, stdin=stdin, timeout=timeout)


def flow_config(tmp_path: Path, base_url: str, *, data_analysis: bool = False) -> Path:
    path = write_config(tmp_path, base_url)
    if data_analysis:
        with path.open("a") as f:
            f.write("\n[runflow]\nuse_data_analysis_agent = true\n")
    return path


def plan_call(*steps: str):
    return tool_calls(
        call(
            "planning",
            {"command": "create", "plan_id": "x", "title": "Sales chart", "steps": list(steps)},
        )
    )


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


def test_two_agents_interactive_with_live_progress(tmp_path, workspace, llm_server):
    pytest.importorskip("matplotlib")  # the data agent draws a chart (the data extra)
    llm_server.push(
        plan_call("[MANUS] Write sales.csv", "[DATA_ANALYSIS] Chart sales.csv"),
        tool_calls(
            call(
                "str_replace_editor",
                {
                    "command": "create",
                    "path": "sales.csv",
                    "file_text": "quarter,sales\nQ1,10\nQ2,14\nQ3,9\nQ4,20\n",
                },
            )
        ),
        tool_calls(call("terminate", {"status": "success"}), content="sales.csv written"),
        tool_calls(
            call(
                "data_visualization",
                {
                    "charts": [{"chartTitle": "Quarterly sales", "csvFilePath": "sales.csv"}],
                    "output_type": "both",
                },
            )
        ),
        tool_calls(call("terminate", {"status": "success"}), content="chart saved"),
        text("Made sales.csv and a quarterly sales chart."),
    )
    cfg = flow_config(tmp_path, llm_server.base_url, data_analysis=True)
    proc = run_flow(
        tmp_path, "-c", str(cfg), "-w", str(workspace), stdin="chart the quarterly sales\nexit\n"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "Made sales.csv and a quarterly sales chart."
    assert (workspace / "visualization" / "Quarterly_sales.png").is_file()
    assert "<svg" in (workspace / "visualization" / "Quarterly_sales.html").read_text()
    err = proc.stderr
    # The plan, then each step's start and end, in the order they happened.
    lines = [
        "Plan: Sales chart (ID: plan_",
        "0. [ ] [MANUS] Write sales.csv",
        "▶ Step 0 of 2 → Manus: [MANUS] Write sales.csv",
        "✓ Step 0 completed — sales.csv written",
        "▶ Step 1 of 2 → Data_Analysis: [DATA_ANALYSIS] Chart sales.csv",
        "✓ Step 1 completed — chart saved",
    ]
    positions = [err.find(line) for line in lines]
    assert -1 not in positions and positions == sorted(positions), err
    assert "Traceback" not in err


def test_failed_step_is_shown_blocked_and_exits_1(tmp_path, workspace, llm_server):
    llm_server.push(
        plan_call("[MANUS] Fetch", "[MANUS] Report"),
        error(
            400, "This model's maximum context length is 10 tokens", code="context_length_exceeded"
        ),
        text("no change"),
        text("reported"),
        text("Report done; fetching failed."),
    )
    cfg = flow_config(tmp_path, llm_server.base_url)
    proc = run_flow(tmp_path, "-p", "report", "-c", str(cfg), "-w", str(workspace))
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.strip() == "Report done; fetching failed."
    assert "✗ Step 0 blocked — failed:" in proc.stderr
    assert "✓ Step 1 completed — reported" in proc.stderr
    assert "error: not every step was completed (blocked: 0)" in proc.stderr


def test_timeout_stops_the_flow(tmp_path, workspace, llm_server):
    llm_server.push(plan_call("[MANUS] Hang"), slow(60, text("late")))
    cfg = flow_config(tmp_path, llm_server.base_url)
    # The limit covers start-up and planning too; 4 s leaves room for both on a busy machine.
    proc = run_flow(
        tmp_path, "-p", "hang", "--timeout", "4", "-c", str(cfg), "-w", str(workspace), timeout=60
    )
    assert proc.returncode == 1, proc.stderr
    assert len(llm_server.requests) == 2, proc.stderr  # the agent's request was pending
    assert "error: the flow did not finish within 4 s" in proc.stderr
    assert "✗ Step 0 blocked — stopped: the flow's time limit (4 s) ran out" in proc.stderr
    assert proc.stdout.startswith("The flow stopped after 4 s.")


def test_ctrl_c_stops_the_flow_cleanly(tmp_path, workspace, llm_server):
    llm_server.push(plan_call("[MANUS] Long"), slow(60, text("late")))
    cfg = flow_config(tmp_path, llm_server.base_url)
    proc = subprocess.Popen(
        as_from_a_terminal(str(RUN_FLOW), "-p", "long", "-c", str(cfg), "-w", str(workspace)),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(tmp_path),
        cwd=tmp_path,
    )
    try:
        assert llm_server.wait_for_requests(2, timeout=30)  # the step's request is pending
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert "Task interrupted." in err and "Traceback" not in err
    assert out == ""  # no answer for an interrupted task


def test_bad_usage_and_config_exit_2(tmp_path):
    proc = run_flow(tmp_path, "-p", "x", "--timeout", "0")
    assert proc.returncode == 2 and "--timeout must be a positive" in proc.stderr
    proc = run_flow(tmp_path, "-p", "x", "-c", str(tmp_path / "missing.toml"))
    assert proc.returncode == 2 and "missing.toml" in proc.stderr
    assert "Traceback" not in proc.stderr
