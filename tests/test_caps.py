"""Amplification caps: what one hostile model reply or MCP server may make us send, run or store.

The attacks are replayed as an attacker would: a hostile MCP server (tests/mcp_servers/
flood_server.py) or a scripted hostile model driving the real programs (main.py, run_flow.py).
Each test checks the cap holds, the message says so, and the run goes on.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.config import AppConfig, RunflowSettings, config
from app.exceptions import ToolError
from app.flow.planning import plan_window
from app.session.reader import read_session
from app.testing import ScriptedLLMServer, call, text, tool_calls
from app.tool.planning import PlanningTool, format_plan
from tests.conftest import TEST_API_KEY, llm_settings
from tests.mcp_helpers import guarded_env
from tests.mcp_servers.flood_server import TERMINATE_OUTPUT
from tests.test_main_e2e import child_env

ROOT = Path(__file__).resolve().parent.parent
MAIN = ROOT / "main.py"
RUN_FLOW = ROOT / "run_flow.py"
FLOOD = Path(__file__).resolve().parent / "mcp_servers" / "flood_server.py"


# ---- harness ------------------------------------------------------------------------------------


def write_setup(
    tmp_path: Path,
    server: ScriptedLLMServer,
    *,
    toml: str = "",
    mcp: dict[str, Any] | None = None,
) -> Path:
    """config.toml (the scripted model, extra TOML) and, beside it, mcp.json."""
    path = tmp_path / "config.toml"
    path.write_text(
        "[llm]\n"
        'model = "gpt-4o-mini"\n'
        f'base_url = "{server.base_url}"\n'
        f'api_key = "{TEST_API_KEY}"\n'
        "max_retries = 0\n"
        "timeout = 60\n" + toml,
        encoding="utf-8",
    )
    if mcp is not None:
        (tmp_path / "mcp.json").write_text(json.dumps({"mcpServers": mcp}), encoding="utf-8")
    return path


def flood_server(*args: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "stdio",
        "command": sys.executable,
        "args": [str(FLOOD), *args],
        "env": guarded_env(),
        **extra,
    }


def run(
    program: Path, tmp_path: Path, cfg: Path, workspace: Path, prompt: str, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(program), "-c", str(cfg), "-w", str(workspace), "-p", prompt],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=child_env(tmp_path),
        cwd=tmp_path,
        timeout=timeout,
    )


def session_file(workspace: Path) -> Path:
    files = sorted((workspace / ".sessions").glob("*.jsonl"))
    assert len(files) == 1, files
    return files[0]


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def tool_messages(request: Any) -> list[dict[str, Any]]:
    return [m for m in request.messages if m["role"] == "tool"]


def answered_every_call(request: Any) -> bool:
    """The request is valid for the API: each tool call id of an assistant message is
    answered by exactly one tool message."""
    asked = [
        c["id"]
        for m in request.messages
        if m["role"] == "assistant"
        for c in m.get("tool_calls") or []
    ]
    answered = [m["tool_call_id"] for m in tool_messages(request)]
    return sorted(asked) == sorted(answered) and len(set(answered)) == len(answered)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


# ---- MCP: 2,000 tools x 4 KB, and a server's `terminate` ----------------------------------------


@pytest.mark.e2e
def test_mcp_tool_flood_is_capped_and_server_terminate_does_not_end_the_run(
    tmp_path, workspace, llm_server
):
    server = flood_server(
        "--tools", "2000", "--description-chars", "4096", "--schema-chars", "40000"
    )
    cfg = write_setup(tmp_path, llm_server, mcp={"flood": server})
    llm_server.push(
        tool_calls(call("mcp_flood_terminate", {"status": "success"})),
        tool_calls(call("terminate", {"status": "success"}), content="done for real"),
    )
    proc = run(MAIN, tmp_path, cfg, workspace, "use the tools")
    assert proc.returncode == 0, proc.stderr[-3000:]

    # The server's terminate ran as an ordinary tool: the run went on to our own terminate.
    assert len(llm_server.requests) == 2
    assert TERMINATE_OUTPUT in tool_messages(llm_server.requests[1])[-1]["content"]
    assert "done for real" in proc.stdout

    for request in llm_server.requests:
        # Uncapped, every request carried 2,000 x 4 KB of descriptions (8.3 MB).
        assert len(request.raw) < 400_000, len(request.raw)
        offered = {t["function"]["name"]: t["function"] for t in request.tools}
        mcp_tools = [f for name, f in offered.items() if name.startswith("mcp_flood_")]
        assert len(mcp_tools) == 128  # [mcp] max_tools
        assert all(len(f["description"]) <= 1024 for f in mcp_tools)
        assert any(
            "[description cut: 4096 characters in all]" in f["description"] for f in mcp_tools
        )
        assert "mcp_flood_huge_schema" not in offered  # over [mcp] max_schema_chars
        assert {"mcp_flood_terminate", "terminate", "bash"} <= set(offered)
    # Reported once, naming the server and the setting.
    assert proc.stderr.count("MCP server 'flood' offers 1874 tool(s) more than fit") == 1
    assert "max_tools" in proc.stderr
    assert "MCP server 'flood': 1 tool(s) left out because their input schema" in proc.stderr


# ---- MCP: 20,000 progress notifications ---------------------------------------------------------


@pytest.mark.e2e
def test_progress_flood_is_coalesced_and_the_call_ends_by_its_total_deadline(
    tmp_path, workspace, llm_server
):
    server = flood_server("--progress", "20000", timeout=1, max_timeout=4)
    cfg = write_setup(tmp_path, llm_server, mcp={"flood": server})
    llm_server.push(
        tool_calls(call("mcp_flood_flood", {})),
        tool_calls(call("terminate", {"status": "success"}), content="finished after the flood"),
    )
    proc = run(MAIN, tmp_path, cfg, workspace, "flood me")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(llm_server.requests) == 2
    answer = tool_messages(llm_server.requests[1])[-1]["content"]
    assert "did not finish 'flood' within 4 s in all" in answer

    path = session_file(workspace)
    assert path.stat().st_size < 100_000  # uncapped: 14 MB of progress records
    events = [r["event"] for r in records(path) if r["type"] == "event"]
    progress = [e for e in events if e["kind"] == "tool_progress"]
    # At most one report per 0.5 s ([mcp] progress_interval) of a call of at most 4 s (20,000
    # were sent): 8, plus the first and the last.
    assert 1 <= len(progress) <= 10, len(progress)
    times = {r["event"]["kind"]: r["t"] for r in records(path) if r["type"] == "event"}
    # The call ended by its total deadline (max_timeout), however often progress came.
    assert times["tool_result"] - times["tool_call"] < 4 + 2


# ---- one reply with 2,000 tool calls -------------------------------------------------------------


@pytest.mark.e2e
def test_one_reply_with_2000_calls_runs_only_the_cap(tmp_path, workspace, llm_server):
    cfg = write_setup(tmp_path, llm_server, toml="[limits]\nmax_tool_calls_per_reply = 12\n")
    calls = [
        call("str_replace_editor", {"command": "create", "path": f"f{i}.txt", "file_text": "x"})
        for i in range(2000)
    ]
    llm_server.push(
        tool_calls(*calls),
        tool_calls(call("terminate", {"status": "success"}), content="enough files"),
    )
    proc = run(MAIN, tmp_path, cfg, workspace, "make many files")
    assert proc.returncode == 0, proc.stderr[-3000:]

    assert sorted(p.name for p in workspace.glob("f*.txt")) == sorted(
        f"f{i}.txt" for i in range(12)
    )
    follow_up = llm_server.requests[1]
    assert answered_every_call(follow_up)  # every call id got its answer, in a valid request
    answers = tool_messages(follow_up)
    assert len(answers) == 2000
    not_run = [m for m in answers if "was not run" in m["content"]]
    assert len(not_run) == 1988
    assert "asked for 2000 tool calls, and at most 12 run per reply" in not_run[0]["content"]
    assert "max_tool_calls_per_reply" in not_run[0]["content"]
    assert "were answered 'not run'" in proc.stderr


# ---- a 20 MB reply ----------------------------------------------------------------------------


@pytest.mark.e2e
def test_a_20_mb_reply_is_stored_once(tmp_path, workspace, llm_server):
    huge = "".join(f"line {i:07d} of a very long answer\n" for i in range(600_000))[:20_000_000]
    cfg = write_setup(tmp_path, llm_server)
    llm_server.push(text(huge))
    proc = run(MAIN, tmp_path, cfg, workspace, "write a lot")
    assert proc.returncode == 0, proc.stderr[-3000:]

    path = session_file(workspace)
    # Uncapped: thought, message, step result, run event and run record: 100 MB.
    assert path.stat().st_size < 2 * len(huge)
    data = read_session(path)
    kept = [m["content"] for m in data.snapshot().messages if m["role"] == "assistant"]
    assert kept == [huge]  # the full text, once
    finished = [r for r in records(path) if r["type"] == "run_finished"]
    assert finished[0]["final_answer"].endswith("[cut for storage: 20000000 characters in all]")


# ---- a 50,000-step plan --------------------------------------------------------------------------


@pytest.mark.e2e
def test_a_50000_step_plan_is_refused(tmp_path, workspace, llm_server):
    cfg = write_setup(tmp_path, llm_server)
    steps = [f"step number {i}: do a small thing" for i in range(50_000)]
    llm_server.push(
        tool_calls(
            call("planning", {"command": "create", "plan_id": "p", "title": "Huge", "steps": steps})
        ),
        text("understood"),
        text("carried out"),
        text("checked"),
        text("summary: all done"),
    )
    proc = run(RUN_FLOW, tmp_path, cfg, workspace, "a task")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "The plan has 50000 steps; at most 100 are allowed (max_plan_steps)" in proc.stderr
    # The flow went on with a small plan: no later request carries the 50,000 steps.
    assert len(llm_server.requests) == 5
    assert all(len(r.raw) < 100_000 for r in llm_server.requests[1:])


# ---- units: the planning tool and the step prompt -----------------------------------------------


async def test_planning_tool_refuses_oversized_plans():
    tool = PlanningTool()
    with pytest.raises(ToolError, match=r"The plan has 50000 steps; at most 100 are allowed"):
        await tool.execute(command="create", plan_id="p", title="t", steps=["s"] * 50_000)
    with pytest.raises(ToolError, match=r"longer than 1000 characters .*step\(s\) 1\b"):
        await tool.execute(command="create", plan_id="p", title="t", steps=["ok", "x" * 1001])
    result = await tool.execute(command="create", plan_id="p", title="t", steps=["s"] * 100)
    assert "Progress: 0/100" in str(result.output)
    with pytest.raises(ToolError, match="at most 100"):
        await tool.execute(command="update", plan_id="p", steps=["s"] * 101)
    assert len(tool.plans["p"]["steps"]) == 100  # a refused update changes nothing


async def test_plan_caps_come_from_the_config(llm_server):
    config.use(
        AppConfig(
            llm=llm_settings(llm_server),
            run_flow_config=RunflowSettings(max_plan_steps=3, max_step_chars=10),
        )
    )
    try:
        tool = PlanningTool()
        with pytest.raises(ToolError, match="at most 3 are allowed"):
            await tool.execute(command="create", plan_id="p", title="t", steps=["a"] * 4)
        with pytest.raises(ToolError, match="longer than 10 characters"):
            await tool.execute(command="create", plan_id="p", title="t", steps=["a" * 11])
    finally:
        config.reset()


async def test_step_prompt_shows_a_large_plan_around_the_current_step():
    tool = PlanningTool()
    steps = [f"{i:03d} " + "w" * 900 for i in range(100)]
    await tool.execute(command="create", plan_id="p", title="Big", steps=steps)
    plan = tool.plans["p"]
    for i in range(50):
        plan["step_statuses"][i] = "completed"
    window = plan_window(plan, 50, 8000)
    assert len(format_plan(plan)) > 90_000 and len(window) <= 8000
    assert "Progress: 50/100 steps completed" in window  # the header stays
    assert "50. [ ] 050 " in window
    assert "earlier step(s) not shown:" in window and "completed" in window
    assert "later step(s) not shown:" in window and "not started" in window
