"""A damaged session line is skipped and reported, never fatal; session files are out of the
sandbox's reach (security finding 7).

The reader gets every kind of damage a line can have: nesting deeper than the JSON parser
follows, wrong types, NaN and infinities, numbers too large, invalid UTF-8, lone surrogates.
A seeded fuzzer mutates whole session files the same ways; then ``main.py --resume`` carries
on a session holding each kind, and sandboxed code tries to reach the session files.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
from pathlib import Path
from typing import Any

import pytest

from app.agent.toolcall import ToolCallAgent
from app.exceptions import SessionError
from app.schema import Message
from app.session import SessionData, SessionStore, read_session
from app.testing import ScriptedLLMServer, call, text, tool_calls
from app.text import REPLACEMENT
from tests.sandbox_utils import requires_bwrap
from tests.test_main_e2e import run_main, write_config

DEEP = "[" * 100_000 + "]" * 100_000

#: A session cut short: a task, its messages, a checkpoint with usage, a plan.
GOOD: list[dict[str, Any]] = [
    {"type": "session", "version": 1, "id": "s", "kind": "agent", "created": 1.5},
    {"type": "task", "t": 2.0, "prompt": "the task"},
    {"type": "run_started", "agent": "Manus", "prompt": "the task", "max_steps": 5},
    {"type": "message", "agent": "Manus", "message": {"role": "user", "content": "the task"}},
    {
        "type": "message",
        "agent": "Manus",
        "message": {
            "role": "assistant",
            "content": "on it",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
            ],
        },
    },
    {
        "type": "message",
        "agent": "Manus",
        "message": {"role": "tool", "content": "ok", "tool_call_id": "c1", "name": "bash"},
    },
    {
        "type": "checkpoint",
        "agent": "Manus",
        "name": "Manus",
        "step": 1,
        "max_steps": 5,
        "state": "RUNNING",
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5, "requests": 1},
    },
    {
        "type": "plan",
        "active_plan_id": "p",
        "plans": {
            "p": {
                "plan_id": "p",
                "title": "t",
                "steps": ["a"],
                "step_statuses": ["not_started"],
                "step_notes": [""],
            }
        },
    },
]

#: (line, why it is damaged): each is skipped and reported.
DAMAGED: list[tuple[bytes, str]] = [
    (b'{"type":"message","agent":"Manus","message":' + DEEP.encode() + b"}", "nested"),
    (b'{"type":"message","agent":"Manus","message":{"role":5,"content":"x"}}', "role"),
    (b'{"type":"checkpoint","agent":"Manus","step":NaN}', "step"),
    (b'{"type":"checkpoint","agent":"Manus","step":Infinity}', "step"),
    (b'{"type":"checkpoint","agent":"Manus","max_steps":1e999}', "max_steps"),
    (b'{"type":"checkpoint","agent":"Manus","step":1' + b"0" * 5000 + b"}", "ValueError"),
    (b'{"type":"checkpoint","agent":"Manus","step":10000000000000000000000}', "step"),
    (b'{"type":"checkpoint","agent":"Manus","step":"3"}', "step"),
    (b'{"type":"checkpoint","agent":"Manus","step":true}', "step"),
    (b'{"type":"checkpoint","agent":"Manus","step":-1}', "step"),
    (b'{"type":"checkpoint","agent":"Manus","usage":[1,2]}', "usage"),
    (b'{"type":"checkpoint","agent":"Manus","usage":{"prompt_tokens":"many"}}', "usage"),
    (b'{"type":"checkpoint","agent":"Manus","usage":{"cost":NaN}}', "cost"),
    (b'{"type":"checkpoint","agent":"Manus","name":{"a":1}}', "name"),
    (b'{"type":"memory","agent":"Manus","messages":{"role":"user"}}', "messages"),
    (b'{"type":"memory","agent":"Manus","messages":[{"role":"user","content":["x"]}]}', "content"),
    (b'{"type":"message","agent":"Manus","message":"hello"}', "message"),
    (
        b'{"type":"message","agent":"Manus","message":{"role":"assistant",'
        b'"tool_calls":[{"id":1,"function":{"name":"x"}}]}}',
        "tool call",
    ),
    (b'{"type":"message","agent":"Manus","message":{"role":"assistant","tool_calls":{}}}', "tool"),
    (
        b'{"type":"plan","active_plan_id":"p","plans":{"p":{"title":"t","steps":["a"],'
        b'"step_statuses":[],"step_notes":[]}}}',
        "plan",
    ),
    (b'{"type":"plan","active_plan_id":7,"plans":{}}', "active_plan_id"),
    (b'{"type":"plan","plans":{"p":"not a plan"}}', "plan"),
    (b'{"type":"run_started","agent":["Manus"],"max_steps":3}', "agent"),
    (b'{"type":"task","prompt":{"x":1}}', "prompt"),
    (b"[1, 2, 3]", "not a JSON object"),
    (b"\x00garbage", "not JSON"),
    (b"\xff\xfe{{{", "not JSON"),
    (b'{"type": "message", "agent": "Manus", "message": {"role": "user", "content": "x"', "JSON"),
]

#: Lines that are odd but usable: read, with what cannot be valid made valid.
ODD: list[bytes] = [
    b'{"type":"message","agent":"Manus","message":{"role":"user","content":"bad \\ud800 text"}}',
    b'{"type":"message","agent":"Manus","message":{"role":"user","content":"caf\xe9"}}',
    b'{"type":"message","agent":"Manus","message":{"role":"user","content":"late"},"t":NaN}',
    b'{"type":"task","prompt":"later","t":1' + b"0" * 400 + b"}",
]


def session_bytes(records: list[dict[str, Any]], extra: list[bytes], at: int = 4) -> bytes:
    lines = [json.dumps(r).encode() for r in records]
    return b"\n".join(lines[:at] + extra + lines[at:]) + b"\n"


def restore(data: SessionData, make_llm: Any) -> ToolCallAgent:
    """What ``--resume`` does with the data: it must never fail."""
    agent = ToolCallAgent(llm=make_llm(), name="Manus")
    data.restore_agent(agent, "Manus")
    return agent


def test_every_damaged_line_is_skipped_and_reported(tmp_path: Path, make_llm: Any) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(session_bytes(GOOD, [line for line, _ in DAMAGED] + ODD))
    data = read_session(path)
    assert len(data.problems) == len(DAMAGED), data.problems
    for problem, (_, why) in zip(data.problems, DAMAGED, strict=True):
        assert "is damaged" in problem and "skipped" in problem, problem
        assert why.lower() in problem.lower(), (why, problem)
    numbers = [int(p.split()[1]) for p in data.problems]
    assert numbers == list(range(5, 5 + len(DAMAGED)))  # each named by its line
    snapshot = data.snapshot("Manus")
    assert snapshot is not None and snapshot.running and data.incomplete
    assert snapshot.step == 1 and snapshot.max_steps == 5 and snapshot.usage is not None
    contents = [m.get("content") for m in snapshot.messages]
    assert contents == [
        "the task",
        f"bad {REPLACEMENT} text",
        f"caf{REPLACEMENT}",
        "late",
        "on it",
        "ok",
    ]
    assert data.tasks == ["the task", "later"] and data.updated == 2.0
    assert data.plans["p"]["steps"] == ["a"]
    agent = restore(data, make_llm)
    assert [m.content for m in agent.memory.messages] == contents
    assert agent.current_step == 1 and agent._run_usage.total_tokens == 5


def test_a_damaged_header_is_reported_and_listing_never_fails(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    header = {"type": "session", "id": ["x"], "kind": 5, "program": None, "created": "yesterday"}
    (tmp_path / "a.jsonl").write_text(json.dumps(header) + "\n")
    (tmp_path / "b.jsonl").write_bytes(b'{"type":"session","created":NaN}\n')
    (tmp_path / "c.jsonl").write_bytes(DEEP.encode() + b"\n")  # no header at all
    infos = {info.id: info for info in store.list()}
    assert set(infos) == {"a", "b", "c"}
    assert infos["a"].kind == "agent" and infos["a"].created > 0
    assert any("created" in p for p in infos["a"].problems)
    assert infos["b"].state == "empty"
    assert infos["c"].state == "unreadable"


# ---- fuzzing -----------------------------------------------------------------------------------

NASTY = [
    "NaN",
    "Infinity",
    "-Infinity",
    "1e999",
    "1" + "0" * 400,
    "1" + "0" * 5000,
    "-1",
    "true",
    "null",
    '""',
    '"\\ud800"',
    '"\\udfff\\ud800"',
    "[]",
    "{}",
    "[[[[1]]]]",
    '{"role": 5}',
    '"x"',
    "1.5",
    DEEP,
    "[" * 990 + "]" * 990,
]


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a record a value could be swapped."""
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, child in value.items():
            found += paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += paths(child, (*prefix, index))
    return found


def mutate(rng: random.Random, records: list[dict[str, Any]]) -> bytes:
    lines = [json.dumps(r).encode() for r in records]
    for _ in range(rng.randint(1, 4)):
        index = rng.randrange(len(lines))
        how = rng.randrange(4)
        if how == 0:  # a value of the wrong kind
            try:
                record = json.loads(lines[index])
            except (ValueError, RecursionError):
                continue  # already damaged by an earlier mutation
            if not isinstance(record, dict) or not paths(record):
                continue
            where = rng.choice(paths(record))
            holder = record
            for key in where[:-1]:
                holder = holder[key]
            holder[where[-1]] = "\x00SWAP\x00"
            swapped = json.dumps(record).replace('"\\u0000SWAP\\u0000"', rng.choice(NASTY))
            lines[index] = swapped.encode()
        elif how == 1:  # cut anywhere
            lines[index] = lines[index][: rng.randrange(len(lines[index]) + 1)]
        elif how == 2:  # bytes flipped
            line = bytearray(lines[index])
            for _ in range(rng.randint(1, 3)):
                line[rng.randrange(len(line))] = rng.randrange(256)
            lines[index] = bytes(line).replace(b"\n", b" ")
        else:  # a line repeated elsewhere
            lines.insert(rng.randrange(len(lines)), lines[index])
    return b"\n".join(lines) + b"\n"


def test_fuzzed_session_files_never_break_reading_listing_or_restoring(
    tmp_path: Path, make_llm: Any
) -> None:
    rng = random.Random(20261125)
    store = SessionStore(tmp_path)
    flow = [{**GOOD[0], "kind": "flow"}, *GOOD[1:]]
    reported = 0
    for number in range(300):
        path = tmp_path / f"f{number}.jsonl"
        path.write_bytes(mutate(rng, flow if number % 3 == 0 else GOOD))
        try:
            data = read_session(path)
        except SessionError:
            continue  # the header itself was damaged: "not a session file", a clear error
        reported += bool(data.problems)
        assert isinstance(data.state, str) and isinstance(data.incomplete, bool)
        assert data.first_prompt is None or isinstance(data.first_prompt, str)
        json.dumps(data.header, ensure_ascii=False).encode("utf-8")
        for problem in data.problems:
            problem.encode("utf-8")
        for snapshot in data.agents.values():
            for message in snapshot.messages:
                Message(**{k: v for k, v in message.items() if k != "image_omitted"})
        if "Manus" in data.agents:
            restore(data, make_llm)
    assert reported > 100  # the mutations did damage most files
    assert len(store.list(limit=None)) == 300


# ---- main.py --resume, end to end --------------------------------------------------------------


def main_py(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_main(tmp_path, *args, timeout=120)


@pytest.mark.e2e
def test_resume_carries_on_a_session_with_every_kind_of_damage(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with ScriptedLLMServer() as server:
        server.push(
            tool_calls(call("bash", {"command": "echo step one"}), content="first step"),
            text("finished the first time"),
        )
        cfg = write_config(tmp_path, server.base_url)
        common = ("-c", str(cfg), "-w", str(workspace))
        first = main_py(tmp_path, "-p", "the long task", *common)
        assert first.returncode == 0, first.stderr
        [path] = (workspace / ".sessions").glob("*.jsonl")
        # Cut short as a kill would leave it (no run_finished), then damaged in the middle.
        lines = [
            line
            for line in path.read_bytes().splitlines()
            if json.loads(line).get("type") != "run_finished"
        ]
        damaged = [line for line, _ in DAMAGED[:-1]]  # the last: a cut-off line, kept last
        path.write_bytes(
            b"\n".join(lines[:3] + damaged + lines[3:]) + b"\n" + DAMAGED[-1][0] + b"\n"
        )
        listing = main_py(tmp_path, "--list-sessions", *common)
        assert listing.returncode == 0 and "interrupted" in listing.stdout, listing.stderr
        asked = len(server.requests)
        server.push(text("carried on"))
        resumed = main_py(tmp_path, "--resume", path.stem, *common)
        assert resumed.returncode == 0, resumed.stderr
        assert "Traceback" not in resumed.stderr
        assert "Carrying on the task that was cut short" in resumed.stderr
        assert resumed.stdout.strip() == "carried on"
        warnings = [w for w in resumed.stderr.splitlines() if w.startswith("warning: session")]
        assert len(warnings) == len(DAMAGED), resumed.stderr
        assert "cut off" in warnings[-1]
        # The model got the conversation as it was: nothing lost but the damaged lines.
        assert len(server.requests) == asked + 1
        sent = [m.get("content") for m in server.requests[-1].body["messages"]]
        assert "the long task" in sent and "first step" in sent
        assert any("step one" in (c or "") for c in sent)
    again = main_py(tmp_path, "--list-sessions", *common)
    assert "  finished  " in again.stdout, again.stdout + again.stderr


# ---- the sandbox cannot reach the session files ------------------------------------------------


@pytest.mark.e2e
@requires_bwrap
def test_sandboxed_code_cannot_read_or_write_the_session_files(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    probe = (
        "ls -A .sessions | wc -l; "
        "echo pwned > .sessions/evil.jsonl || echo WRITE-REFUSED; "
        'for f in .sessions/*.jsonl; do echo \'{"type":"run_finished"}\' >> "$f"; done; '
        "rm -rf .sessions 2>&1 | tail -1; mv .sessions gone 2>/dev/null || echo MOVE-REFUSED; "
        "cat .sessions/*.jsonl 2>&1 | head -c 200"
    )
    with ScriptedLLMServer() as server:
        server.push(tool_calls(call("bash", {"command": probe})), text("probed"))
        cfg = write_config(tmp_path, server.base_url)
        cfg.write_text(cfg.read_text() + '[sandbox]\nbackend = "bubblewrap"\n')
        run = main_py(tmp_path, "-p", "look at the sessions", "-c", str(cfg), "-w", str(workspace))
        assert run.returncode == 0, run.stderr
        [seen] = [m["content"] for m in server.requests[1].body["messages"] if m["role"] == "tool"]
    assert "WRITE-REFUSED" in seen and "MOVE-REFUSED" in seen, seen
    assert seen.split("executed:\n", 1)[1].splitlines()[0].strip() == "0", seen  # empty
    assert '"type":"session"' not in seen.replace(" ", "")  # nothing of the file was read
    files = list((workspace / ".sessions").iterdir())
    assert len(files) == 1 and files[0].suffix == ".jsonl"
    # Not handed to the sandbox's user either (bubblewrap as root gives it the workspace).
    owners = {(workspace / ".sessions").stat().st_uid, files[0].stat().st_uid}
    assert owners == {os.geteuid()}, owners
    data = read_session(files[0])
    assert data.problems == [] and data.state == "finished"
    lines = files[0].read_bytes().splitlines()
    assert b"pwned" not in lines and b'{"type":"run_finished"}' not in lines  # nothing added


def _docker_problem() -> str | None:
    try:
        import docker
    except ImportError:
        return "the docker SDK is not installed (extra 'docker')"
    try:
        client = docker.from_env()
        client.ping()
        client.close()
    except Exception as exc:  # any failure means: no engine here
        return f"no Docker engine reachable: {exc}"
    return None


@pytest.mark.e2e
@pytest.mark.skipif(_docker_problem() is not None, reason=str(_docker_problem()))
async def test_the_docker_sandbox_cannot_reach_the_session_files(tmp_path: Path) -> None:
    from app.config import SandboxSettings
    from app.sandbox.docker import DockerSandbox

    sessions = tmp_path / ".sessions"
    sessions.mkdir()
    (sessions / "s.jsonl").write_bytes(session_bytes(GOOD, []))
    box = DockerSandbox(SandboxSettings(backend="docker", memory_limit="256m"), tmp_path)
    try:
        result = await box.run(
            "ls -A .sessions | wc -l; echo x > .sessions/evil.jsonl || echo WRITE-REFUSED; "
            "rm -f .sessions/s.jsonl; echo hi > in.txt"
        )
    finally:
        await box.cleanup()
    assert result.stdout.split() == ["0", "WRITE-REFUSED"], (result.stdout, result.stderr)
    assert (tmp_path / "in.txt").read_text() == "hi\n"  # the rest of the workspace is writable
    assert sorted(p.name for p in sessions.iterdir()) == ["s.jsonl"]
    assert read_session(sessions / "s.jsonl").problems == []


@pytest.mark.e2e
def test_the_web_ui_reopens_a_damaged_session_and_carries_it_on(tmp_path: Path) -> None:
    from tests.web_ui_helpers import WebApp, sse_entries

    session_id = "20260101-120000-abcdef"
    stored = tmp_path / "ws" / "web" / ".sessions"
    stored.mkdir(parents=True)
    header = {**GOOD[0], "id": session_id, "program": "openmanus_web", "web": True}
    deep_event = (
        b'{"type":"event","agent":"Manus","event":{"kind":"thought","text":' + DEEP.encode()
    )
    damaged = [line for line, _ in DAMAGED] + [deep_event + b"}"]
    (stored / f"{session_id}.jsonl").write_bytes(session_bytes([header, *GOOD[1:]], damaged))
    with ScriptedLLMServer() as server:
        app = WebApp(tmp_path, server.base_url).start()
        try:
            with app.client() as client:
                opened = client.post(f"/api/sessions/{session_id}/open", json={})
                assert opened.status_code == 200, opened.text
                assert opened.json()["incomplete"] is True
                server.push(text("carried on in the web"))
                assert (
                    client.post(f"/api/sessions/{session_id}/continue", json={}).status_code == 202
                )
                app.wait_idle(client, session_id)
                with client.stream("GET", f"/api/sessions/{session_id}/events") as stream:
                    entries = [entry for _, entry in sse_entries(stream)]
            sent = [m.get("content") for m in server.requests[-1].body["messages"]]
        finally:
            app.stop()
    assert entries[0] == {**entries[0], "kind": "task_started", "prompt": "the task"}
    assert entries[-1]["final_answer"] == "carried on in the web"
    assert "the task" in sent and "on it" in sent
    assert not any("Traceback" in line for line in app.stderr), "".join(app.stderr)
