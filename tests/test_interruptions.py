"""Interrupting the terminal programs the ways a user does: Ctrl-C, a closed pipe, a typo,
``kill -9``. Real ``main.py``/``run_flow.py`` processes against the scripted LLM server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.session import SessionStore
from app.testing import ScriptedLLMServer, call, slow, text, tool_calls
from tests.sandbox_utils import processes_under, requires_bwrap
from tests.test_main_e2e import MAIN, as_from_a_terminal, child_env, run_main, write_config
from tests.test_run_flow_e2e import RUN_FLOW, plan_call, run_flow

pytestmark = pytest.mark.e2e


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


def until(predicate, timeout: float = 30.0) -> bool:
    """Poll an observable condition (a process table, a server's request log)."""
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        if predicate():
            return True
        time.sleep(0.05)  # polls /proc-backed state; noqa: sleep-ok
    return predicate()


def start(program: Path, tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    """``program`` as a terminal starts it (SIGINT not ignored, however the suite was started)."""
    return subprocess.Popen(
        as_from_a_terminal(str(program), *args),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(tmp_path),
        cwd=tmp_path,
    )


def interrupt(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    """Ctrl-C as the terminal sends it, then the program's exit code and output."""
    try:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
    return proc.returncode, out, err


def listed_state(tmp_path: Path, program_args: tuple[str, ...], session_id: str) -> str:
    listing = run_main(tmp_path, *program_args, "--list-sessions")
    assert listing.returncode == 0, listing.stderr
    [line] = [line for line in listing.stdout.splitlines() if line.startswith(session_id)]
    return line.split()[4]


def user_texts(request: dict) -> list[str]:
    return [str(m.get("content")) for m in request.messages if m["role"] == "user"]


# ---- Ctrl-C: one `interrupted` state, and --resume carries the task on --------------------------


def test_ctrl_c_in_main_py_is_interrupted_and_resume_carries_the_task_on(
    tmp_path, workspace, llm_server
):
    llm_server.push(slow(120, text("too late")))
    cfg = write_config(tmp_path, llm_server.base_url)
    common = ("-c", str(cfg), "-w", str(workspace))
    proc = start(MAIN, tmp_path, "-p", "compute the answer", *common)
    assert until(lambda: len(llm_server.requests) >= 1)
    code, _out, err = interrupt(proc)
    assert code == 130, err
    assert "Traceback" not in err
    [session_file] = (workspace / ".sessions").glob("*.jsonl")
    session_id = session_file.stem
    assert listed_state(tmp_path, common, session_id) == "interrupted"

    llm_server.push(
        tool_calls(call("terminate", {"status": "success"}), content="The answer is 42.")
    )
    resumed = run_main(tmp_path, "--resume", session_id, *common)
    assert resumed.returncode == 0, resumed.stderr
    assert "Carrying on the task" in resumed.stderr
    assert "The answer is 42." in resumed.stdout
    # The carried-on request holds the earlier conversation, the task asked once.
    assert user_texts(llm_server.requests[-1]).count("compute the answer") == 1
    assert listed_state(tmp_path, common, session_id) == "finished"


def test_ctrl_c_in_run_flow_py_is_interrupted_and_resume_carries_the_step_on(
    tmp_path, workspace, llm_server
):
    llm_server.push(plan_call("[MANUS] Write the report"), slow(120, text("too late")))
    cfg = write_config(tmp_path, llm_server.base_url)
    common = ("-c", str(cfg), "-w", str(workspace))
    proc = start(RUN_FLOW, tmp_path, "-p", "a report", *common)
    assert until(lambda: len(llm_server.requests) >= 2)  # the plan, then step 0's first call
    step_prompt = user_texts(llm_server.requests[1])[-1]
    code, _out, err = interrupt(proc)
    assert code == 130, err
    assert "Traceback" not in err
    [session_file] = (workspace / ".sessions").glob("*.jsonl")
    session_id = session_file.stem
    assert listed_state(tmp_path, common, session_id) == "interrupted"
    data = SessionStore.for_workspace(workspace).load(session_id)
    assert data.plans[data.active_plan_id]["step_statuses"] == ["in_progress"]

    llm_server.push(
        tool_calls(call("terminate", {"status": "success"}), content="Report written."),
        text("The report is done."),
    )
    resumed = run_flow(tmp_path, "--resume", session_id, *common)
    assert resumed.returncode == 0, resumed.stderr
    assert "The report is done." in resumed.stdout
    # The step's agent went on from where it stopped: no second step prompt, no new plan.
    carried = llm_server.requests[2]
    assert user_texts(carried).count(step_prompt) == 1
    data = SessionStore.for_workspace(workspace).load(session_id)
    assert data.plans[data.active_plan_id]["step_statuses"] == ["completed"]
    assert listed_state(tmp_path, common, session_id) == "finished"


# ---- a closed pipe -------------------------------------------------------------------------


def test_list_sessions_into_a_pipe_closed_early_is_quiet(tmp_path, workspace):
    store = SessionStore.for_workspace(workspace)
    for number in range(40):  # more lines than one pipe write, so the race shows
        recorder = store.start("agent", program="test")
        recorder.note("task", prompt=f"task {number}")
        recorder.writer.flush_now()
        recorder.writer.close()
    cfg = write_config(tmp_path, "http://127.0.0.1:9/v1")
    for _ in range(20):
        lister = subprocess.Popen(
            [sys.executable, str(MAIN), "-c", str(cfg), "-w", str(workspace), "--list-sessions"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=child_env(tmp_path),
            cwd=tmp_path,
        )
        assert lister.stdout is not None and lister.stderr is not None
        first = lister.stdout.readline()  # `| head -1`: one line, then the pipe closes
        lister.stdout.close()
        err = lister.stderr.read().decode()
        code = lister.wait(timeout=60)
        assert first.strip(), err
        assert "Traceback" not in err and "BrokenPipe" not in err, err
        assert code in (0, -signal.SIGPIPE, 141), (code, err)


# ---- bad input is checked before anything is set up ----------------------------------------


def _mcp_marker_config(tmp_path: Path, base_url: str) -> tuple[Path, Path]:
    """A config whose one MCP server leaves a marker file when it is started."""
    marker = tmp_path / "mcp-started"
    cfg = write_config(tmp_path, base_url)
    script = f"open({str(marker)!r}, 'w').close()"
    servers = {"mcpServers": {"marker": {"command": sys.executable, "args": ["-c", script]}}}
    (tmp_path / "mcp.json").write_text(json.dumps(servers), encoding="utf-8")
    return cfg, marker


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("-p", "   "), "the prompt is empty"),
        (("--resume", "20990101-000000-abcdef"), "No session '20990101-000000-abcdef'"),
        (("--resume", "20990101-000000-abcdef", "-p", "go on"), "No session"),
    ],
    ids=["empty-task", "unknown-resume", "unknown-resume-with-task"],
)
@pytest.mark.parametrize("program", [MAIN, RUN_FLOW], ids=["main", "run_flow"])
def test_bad_input_fails_before_any_set_up(tmp_path, workspace, program, args, message):
    server = ScriptedLLMServer()
    server.start()
    try:
        cfg, marker = _mcp_marker_config(tmp_path, server.base_url)
        done = subprocess.run(
            [sys.executable, str(program), *args, "-c", str(cfg), "-w", str(workspace)],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env=child_env(tmp_path),
            cwd=tmp_path,
            timeout=60,
        )
        assert done.returncode == 2, done.stderr
        assert message in done.stderr and "Traceback" not in done.stderr
        assert not marker.exists()  # no agent was built: its MCP server never started
        assert not list(workspace.glob(".sessions/*.jsonl"))  # no `empty` session left
        assert server.requests == []
    finally:
        server.stop()


def test_the_marker_server_would_show_a_built_agent(tmp_path, workspace, llm_server):
    """The control for the test above: a real task does start the MCP server."""
    cfg, marker = _mcp_marker_config(tmp_path, llm_server.base_url)
    llm_server.push(tool_calls(call("terminate", {"status": "success"}), content="ok"))
    run_main(tmp_path, "-p", "hello", "-c", str(cfg), "-w", str(workspace))
    assert marker.exists()


# ---- kill -9: the bash tool's shell and what it started die with the agent -----------------------


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat.rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")


@pytest.mark.parametrize("backend", ["local", pytest.param("bubblewrap", marks=requires_bwrap)])
def test_kill_9_of_main_py_takes_the_bash_shell_and_its_children(
    tmp_path, workspace, llm_server, backend
):
    llm_server.push(
        tool_calls(call("bash", {"command": "sleep 1000 & sleep 1000"}), content="sleeping"),
        slow(120, text("too late")),
    )
    cfg = write_config(tmp_path, llm_server.base_url)
    with cfg.open("a") as f:
        f.write(f'\n[sandbox]\nbackend = "{backend}"\n')
    proc = start(MAIN, tmp_path, "-p", "sleep a while", "-c", str(cfg), "-w", str(workspace))
    try:
        assert until(lambda: len(processes_under(workspace, "sleep")) >= 2, timeout=60), (
            proc.poll(),
            proc.stderr.read() if proc.poll() is not None and proc.stderr else "",
        )
        shells = processes_under(workspace, "--noediting")
        sleeps = processes_under(workspace, "sleep")
        assert shells and len(sleeps) >= 2
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)

    def left() -> list[int]:
        return [pid for pid in shells + sleeps if _alive(pid)]

    assert until(lambda: not left(), timeout=20), left()
