"""Durable sessions: written as a run goes, read back tolerantly, resumed (also after kill -9)."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from app.agent import Manus
from app.agent.toolcall import ToolCallAgent
from app.flow import FlowFactory, FlowType
from app.schema import AgentState
from app.session import SessionStore, read_session
from app.testing import call, error, slow, text, tool_calls
from tests.conftest import TEST_API_KEY
from tests.test_main_e2e import MAIN, child_env, run_main, write_config


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_a_run_is_written_as_it_goes_and_restores_into_a_fresh_agent(
    llm_server, make_llm, tmp_path
):
    llm_server.push(
        tool_calls(
            call("create_chat_completion", {"response": "one"}),
            content="first",
            usage={"prompt_tokens": 10, "completion_tokens": 2},
        ),
        text("all done", usage={"prompt_tokens": 20, "completion_tokens": 3}),
    )
    store = SessionStore.for_workspace(tmp_path)
    agent = ToolCallAgent(llm=make_llm(), answer_tool_names=[])
    recorder = store.start("agent", program="test")
    recorder.attach_agent(agent)
    await agent.run("the task")
    await recorder.close()

    kinds = [r["type"] for r in records(recorder.path)]
    assert kinds[0] == "session" and kinds[-1] == "run_finished"
    assert kinds.count("checkpoint") >= 2 and kinds.count("message") == 4
    # Streamed deltas are not stored; thoughts are.
    events = [r["event"]["kind"] for r in records(recorder.path) if r["type"] == "event"]
    assert "text_delta" not in events and "thought" in events

    data = store.load(recorder.session_id)
    assert data.problems == [] and data.state == "finished" and not data.incomplete
    assert data.first_prompt == "the task"
    fresh = ToolCallAgent(llm=make_llm())
    data.restore_agent(fresh)
    assert fresh.memory.messages == agent.memory.messages
    assert fresh.current_step == 0 and fresh.state == AgentState.IDLE
    assert fresh._run_usage.total_tokens == 35
    # The restored conversation goes on: the follow-up request carries it.
    llm_server.push(text("follow-up answer"))
    await fresh.run("and now?")
    sent = [m.get("content") for m in llm_server.requests[-1].body["messages"]]
    assert sent[1:-1] == [
        "the task",
        "first",
        "Observed output of cmd `create_chat_completion` executed:\none",
        "all done",
        "and now?",
    ]


async def test_trimmed_memory_is_written_whole_and_restored_exactly(llm_server, make_llm, tmp_path):
    llm_server.push(
        *[tool_calls(call("create_chat_completion", {"response": str(i)})) for i in range(6)],
        text("end"),
    )
    agent = ToolCallAgent(llm=make_llm(), answer_tool_names=[])
    agent.memory.max_messages = 6
    store = SessionStore(tmp_path / "s")
    recorder = store.start("agent")
    recorder.attach_agent(agent)
    await agent.run("go")
    await recorder.close()
    assert "memory" in [r["type"] for r in records(recorder.path)]
    fresh = ToolCallAgent(llm=make_llm())
    store.load(recorder.session_id).restore_agent(fresh)
    assert fresh.memory.messages == agent.memory.messages


def test_cut_off_last_line_and_damaged_lines_are_reported_not_fatal(tmp_path):
    path = tmp_path / "s.jsonl"
    lines = [
        {"type": "session", "version": 1, "id": "s", "kind": "agent"},
        {"type": "task", "prompt": "hello"},
        {"type": "message", "agent": "a", "message": {"role": "user", "content": "hello"}},
        {"type": "run_started", "agent": "a", "prompt": "hello", "max_steps": 5},
        {"type": "message", "agent": "a", "message": {"role": "assistant", "content": "hm"}},
        {"type": "checkpoint", "agent": "a", "step": 1, "max_steps": 5, "state": "RUNNING"},
    ]
    text_lines = [json.dumps(line) for line in lines]
    text_lines.insert(3, "{not json")
    path.write_text("\n".join(text_lines) + '\n{"type": "message", "agent": "a", "mess')
    data = read_session(path)
    assert len(data.problems) == 2
    assert "line 4 is damaged" in data.problems[0] and "cut off" in data.problems[1]
    snapshot = data.snapshot("a")
    assert [m["content"] for m in snapshot.messages] == ["hello", "hm"]
    assert snapshot.step == 1 and snapshot.running and data.incomplete
    assert data.state == "interrupted" and data.first_prompt == "hello"


@pytest.mark.e2e
async def test_session_files_hold_no_secrets(llm_server, make_llm, tmp_path):
    llm_server.push(
        tool_calls(
            call("python_execute", {"code": f"print('key is {TEST_API_KEY}')"}),
            content=f"I will print {TEST_API_KEY}",
        ),
        text(f"The key was {TEST_API_KEY}"),
    )
    agent = await Manus.create(llm=make_llm(), workspace=tmp_path / "ws")
    store = SessionStore.for_workspace(tmp_path / "ws")
    recorder = store.start("agent")
    recorder.attach_agent(agent)
    result = await agent.run(f"show me {TEST_API_KEY}")
    await recorder.close()
    content = recorder.path.read_text()
    assert TEST_API_KEY not in content
    assert content.count("***") >= 4
    assert result.state == AgentState.FINISHED


async def test_flow_resumes_its_plan_after_being_cut_off(llm_server, make_llm, tmp_path):
    llm_server.push(
        tool_calls(
            call(
                "planning",
                {
                    "command": "create",
                    "plan_id": "p",
                    "title": "Two",
                    "steps": ["first step", "second step"],
                },
            )
        ),
        tool_calls(call("terminate", {"status": "success"}), content="first done"),
        slow(30, text("never arrives")),
    )
    store = SessionStore.for_workspace(tmp_path)

    def build():
        agent = Manus(llm=make_llm(), workspace=tmp_path)
        return FlowFactory.create_flow(FlowType.PLANNING, {"manus": agent}, llm=make_llm())

    flow = build()
    recorder = store.start("flow")
    recorder.attach_flow(flow)
    recorder.note("task", prompt="two steps")
    task = asyncio.ensure_future(flow.execute("two steps"))
    assert await llm_server.wait_for_requests_async(3, timeout=20)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await recorder.close()

    data = store.load(recorder.session_id)
    assert data.incomplete and data.kind == "flow"
    assert data.plans["p" if "p" in data.plans else data.active_plan_id]["step_statuses"] == [
        "completed",
        "in_progress",
    ]
    llm_server.push(
        tool_calls(call("terminate", {"status": "success"}), content="second done"),
        text("Both steps are done."),
    )
    again = build()
    data.restore_flow(again)
    assert len(again.agents["manus"].memory.messages) > 0
    result = await again.execute("")
    assert result.ok and result.summary == "Both steps are done."
    assert result.plan["step_statuses"] == ["completed", "completed"]
    # The resumed step's request still has the first step's conversation.
    contents = [m.get("content") for m in llm_server.requests[-2].body["messages"]]
    assert "first done" in contents


@pytest.mark.e2e
def test_main_killed_mid_step_resumes_from_its_session_file(tmp_path, llm_server):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    llm_server.push(
        tool_calls(call("python_execute", {"code": "print(6 * 7)"}), content="Computing."),
        slow(60, text("never sent: the process is killed while waiting")),
    )
    cfg = write_config(tmp_path, llm_server.base_url)
    proc = subprocess.Popen(
        [sys.executable, str(MAIN), "-c", str(cfg), "-w", str(workspace), "-p", "compute it"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(tmp_path),
        cwd=tmp_path,
    )
    try:
        # Step 2's request is sent only after step 1 was flushed to the session file.
        assert llm_server.wait_for_requests(2, timeout=60)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    [session_file] = (workspace / ".sessions").glob("*.jsonl")
    session_id = session_file.stem

    listed = run_main(tmp_path, "-c", str(cfg), "-w", str(workspace), "--list-sessions")
    assert listed.returncode == 0
    assert session_id in listed.stdout and "interrupted" in listed.stdout
    assert "compute it" in listed.stdout

    llm_server.push(
        tool_calls(call("terminate", {"status": "success"}), content="The answer is 42.")
    )
    resumed = run_main(tmp_path, "-c", str(cfg), "-w", str(workspace), "--resume", session_id)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip() == "The answer is 42."
    assert "Executing step 2/20" in resumed.stderr and "Executing step 1/" not in resumed.stderr
    # The memory came back intact: the prompt, the call and its output, in order.
    messages = llm_server.requests[2].body["messages"]
    assert [m["role"] for m in messages[1:4]] == ["user", "assistant", "tool"]
    assert messages[1]["content"] == "compute it" and "42" in messages[3]["content"]
    assert messages[2]["tool_calls"][0]["id"] == messages[3]["tool_call_id"]
    # The same file now says the session finished, and usage covers both processes.
    data = read_session(session_file)
    assert data.state == "finished" and not data.incomplete
    assert data.snapshot().usage["requests"] == 2  # step 1 (first process) + step 2
    assert "Tokens:" in resumed.stderr and "in 2 request(s)" in resumed.stderr


@pytest.mark.e2e
def test_resume_of_an_unknown_session_is_a_clear_error(tmp_path, llm_server):
    cfg = write_config(tmp_path, llm_server.base_url)
    proc = run_main(tmp_path, "-c", str(cfg), "-w", str(tmp_path), "--resume", "nope-123")
    assert proc.returncode == 2
    assert "No session 'nope-123'" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.e2e
def test_no_session_writes_nothing(tmp_path, llm_server):
    llm_server.push(text("ok"))
    cfg = write_config(tmp_path, llm_server.base_url)
    proc = run_main(
        tmp_path, "-c", str(cfg), "-w", str(tmp_path / "ws"), "--no-session", "-p", "hi"
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok"
    assert not (tmp_path / "ws" / ".sessions").exists()


@pytest.mark.e2e
def test_resume_keeps_the_recorded_step_budget(tmp_path, llm_server):
    """Issue 29 item 5: a run started with ``--max-steps 6`` resumes with what is left of 6,
    not with the agent's default."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    llm_server.push(
        tool_calls(call("python_execute", {"code": "print(1)"}), content="One."),
        tool_calls(call("python_execute", {"code": "print(2)"}), content="Two."),
        slow(60, text("never sent: the process is killed while waiting")),
    )
    cfg = write_config(tmp_path, llm_server.base_url)
    args = [sys.executable, str(MAIN), "-c", str(cfg), "-w", str(workspace)]
    proc = subprocess.Popen(
        [*args, "--max-steps", "6", "-p", "count"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(tmp_path),
        cwd=tmp_path,
    )
    try:
        assert llm_server.wait_for_requests(3, timeout=60)  # steps 1 and 2 are on file
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)
    [session_file] = (workspace / ".sessions").glob("*.jsonl")

    llm_server.push(tool_calls(call("python_execute", {"code": "print(3)"})), text("x"))
    resumed = run_main(tmp_path, *args[2:], "--resume", session_file.stem)
    assert "Executing step 3/6" in resumed.stderr, resumed.stderr
    assert not re.search(r"step \d+/20", resumed.stderr)
    assert "Executing step 1/" not in resumed.stderr
    assert resumed.returncode == 0, resumed.stderr
    assert read_session(session_file).snapshot().max_steps == 6


@pytest.mark.e2e
def test_resuming_a_failed_session_without_a_prompt_carries_the_task_on(tmp_path, llm_server):
    """Issue 29 item 7: an endpoint outage fails the run; ``--resume`` without a prompt asks
    the failed step again (same budget, same memory) instead of exiting 0 doing nothing."""
    workspace = tmp_path / "ws"
    cfg = write_config(tmp_path, llm_server.base_url)
    llm_server.push(
        tool_calls(call("python_execute", {"code": "print(6 * 7)"}), content="Computing."),
        error(503, "upstream is down"),
    )
    args = ["-c", str(cfg), "-w", str(workspace)]
    first = run_main(tmp_path, *args, "--max-steps", "5", "-p", "compute it")
    assert first.returncode != 0 and "503" in first.stderr
    [session_file] = (workspace / ".sessions").glob("*.jsonl")
    listed = run_main(tmp_path, *args, "--list-sessions")
    assert "failed" in listed.stdout

    llm_server.push(tool_calls(call("terminate", {"status": "success"}), content="It is 42."))
    resumed = run_main(tmp_path, *args, "--resume", session_file.stem)
    assert "Carrying on the task that failed" in resumed.stderr
    assert "Executing step 2/5" in resumed.stderr, resumed.stderr
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip() == "It is 42."
    messages = llm_server.requests[-1].body["messages"]
    assert [m["role"] for m in messages[1:4]] == ["user", "assistant", "tool"]
    assert messages[1]["content"] == "compute it" and "42" in messages[3]["content"]
    assert read_session(session_file).state == "finished"


@pytest.mark.e2e
def test_resuming_a_failed_flow_tries_its_blocked_steps_again(tmp_path, llm_server):
    """The endpoint goes down after planning: the step is blocked and run_flow.py fails.
    ``--resume`` without a prompt tries the blocked step again and finishes the plan."""
    from tests.test_run_flow_e2e import plan_call, run_flow

    workspace = tmp_path / "ws"
    cfg = write_config(tmp_path, llm_server.base_url)
    args = ["-c", str(cfg), "-w", str(workspace)]
    llm_server.push(plan_call("the only step"))
    llm_server.responder = lambda _request: error(503, "upstream is down")
    first = run_flow(tmp_path, *args, "-p", "do it")
    assert first.returncode != 0, first.stderr
    [session_file] = (workspace / ".sessions").glob("*.jsonl")
    assert read_session(session_file).state == "failed"

    llm_server.responder = None
    llm_server.push(
        tool_calls(call("terminate", {"status": "success"}), content="Step done."),
        text("All done."),
    )
    resumed = run_flow(tmp_path, *args, "--resume", session_file.stem)
    assert "Carrying on the task that failed" in resumed.stderr
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip() == "All done."
    assert read_session(session_file).state == "finished"


@pytest.mark.e2e
def test_resuming_a_flow_whose_planning_failed_plans_the_task_again(tmp_path, llm_server):
    from tests.test_run_flow_e2e import plan_call, run_flow

    workspace = tmp_path / "ws"
    cfg = write_config(tmp_path, llm_server.base_url)
    args = ["-c", str(cfg), "-w", str(workspace)]
    llm_server.responder = lambda _request: error(503, "upstream is down")
    first = run_flow(tmp_path, *args, "-p", "do it")
    assert first.returncode != 0, first.stderr
    [session_file] = (workspace / ".sessions").glob("*.jsonl")
    assert read_session(session_file).state == "failed"

    llm_server.responder = None
    llm_server.push(
        plan_call("the only step"),
        tool_calls(call("terminate", {"status": "success"}), content="Step done."),
        text("All done."),
    )
    resumed = run_flow(tmp_path, *args, "--resume", session_file.stem)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip() == "All done."
    assert "do it" in json.dumps(llm_server.requests[-3].body["messages"])
