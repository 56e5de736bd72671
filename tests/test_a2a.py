"""Manus as an A2A agent (``python -m protocol.a2a.app.main``), driven over real HTTP on
127.0.0.1 by the official clients, ``a2a-sdk``'s (Python) and ``@a2a-js/sdk``'s (Node, installed
by scripts/setup-npm-tools.sh), against the scripted model: the card, send, stream, cancel, a
second turn, an ``ask_human`` round trip, two tasks at once, and the Host, Origin and token
rules. Callers' isolation, limits, webhooks and redaction have test_a2a_*.py of their own."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client  # the a2a extra (scripts/test.sh installs it)
from a2a.types import CancelTaskRequest, GetTaskRequest, TaskState

from app.session import SessionStore
from app.testing import ScriptedLLMServer, call, error, slow, text, tool_calls
from tests.a2a_support import (
    ROOT,
    STOPPED,
    A2AServer,
    answer,
    drain,
    events,
    finished,
    kinds,
    run,
    run_js,
    run_program,
    scripted_model,
    states,
    user,
)
from tests.npm_tools import NPM_DIR, node_env, npm_bin
from tests.test_main_e2e import child_env

pytestmark = pytest.mark.e2e

PY = "print(6 * 7)"
ASK = call("ask_human", {"inquire": "Which color?"})
WRITE = "open('out.txt', 'w').write({!r})"
# One script per task (its first prompt), so tasks running at once each get their own story.
SCRIPTS: dict[str, list[Any]] = {
    "py send": [
        tool_calls(call("python_execute", {"code": PY}), content="Computing."),
        "It is 42.",
    ],
    "py stream": [
        tool_calls(call("python_execute", {"code": PY}), content="Let me run it."),
        "42.",
    ],
    "remember 7": ["Noted: 7.", "You said 7."],
    "survive 5": ["Noted 5.", "It was 5.", "Still 5."],
    "py ask": [tool_calls(ASK), "You chose blue."],
    "py slow": [slow(60, text("too late"))],
    "busy first": [slow(60, text("too late"))],
    "py fail": [error(401, "Incorrect API key provided")],
    # Both wait a second for the model: they run side by side.
    "task A": [slow(1, tool_calls(call("python_execute", {"code": WRITE.format("A")}))), "A."],
    "task B": [slow(1, tool_calls(call("python_execute", {"code": WRITE.format("B")}))), "B."],
    "token task": ["Authorized."],
    "legacy send": ["Old clients work."],
    "What is 6 times 7? Check it with Python.": [
        tool_calls(call("python_execute", {"code": PY}), content="Checking."),
        "42.",
        "49.",
    ],
    "What is 6 times 7?": ["42, from JavaScript."],
    "js send": ["JS answer.", "JS second answer."],
    "js stream": [tool_calls(call("python_execute", {"code": PY})), "Streamed."],
    "js ask": [tool_calls(ASK), "Green it is."],
    "js slow": [slow(60, text("too late"))],
}


llm = scripted_model(SCRIPTS)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, llm: ScriptedLLMServer) -> Iterator[A2AServer]:
    running = A2AServer(tmp_path_factory.mktemp("a2a"), llm.base_url)
    yield running
    assert running.stop() in STOPPED, "".join(running.stderr)


@pytest.fixture
async def client(server: A2AServer) -> AsyncIterator[Any]:
    async with httpx.AsyncClient(timeout=60) as http:
        yield await create_client(server.url, ClientConfig(streaming=True, httpx_client=http))


# ---- the card ----------------------------------------------------------------------------------


def test_the_card_is_upstreams_at_both_well_known_paths(server: A2AServer) -> None:
    for path in ("/.well-known/agent-card.json", "/.well-known/agent.json"):
        card = httpx.get(server.url.rstrip("/") + path).json()
        assert card["name"] == "Manus Agent"
        assert card["capabilities"] == {"streaming": True, "pushNotifications": True}
        assert card["defaultInputModes"] == ["text", "text/plain"]
        ids = [s["id"] for s in card["skills"]]
        assert ids == ["Python Execute", "Browser use", "Replace String", "Ask human", "terminate"]
        assert card["supportedInterfaces"][0]["url"] == server.url
        assert card["url"] == server.url  # the 0.3 field, for older clients
        assert "securitySchemes" not in card  # no token configured


# ---- the Python client -------------------------------------------------------------------------


async def test_send_runs_the_agent_and_returns_the_answer(server, llm) -> None:
    async with httpx.AsyncClient(timeout=60) as http:
        plain = await create_client(server.url, ClientConfig(streaming=False, httpx_client=http))
        seen = await events(plain, user("py send"))
    assert len(seen) == 1  # not streaming: the task as it ended
    task = seen[0].task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert answer(task) == "It is 42."
    assert task.artifacts[0].name == f"task_{task.id}"
    outputs = [m for m in llm.requests if "py send" in json.dumps(m.messages)]
    assert "42" in json.dumps(outputs[-1].messages)  # the tool really ran


async def test_stream_reports_thoughts_tools_and_the_answer(client) -> None:
    seen = await events(client, user("py stream"))
    assert seen[0].HasField("task")  # the task first, then its updates
    assert states(seen)[0] == TaskState.TASK_STATE_WORKING
    assert states(seen)[-1] == TaskState.TASK_STATE_COMPLETED
    assert kinds(seen)[:3] == ["thought", "tool_call", "tool_result"]
    results = [
        e.status_update.status.message.parts[0].text
        for e in seen
        if e.HasField("status_update") and kinds([e]) == ["tool_result"]
    ]
    assert '"observation": "42"' in results[0]
    artifacts = [e.artifact_update for e in seen if e.HasField("artifact_update")]
    assert [a.artifact.parts[0].text for a in artifacts] == ["42."]
    assert artifacts[0].last_chunk


async def test_a_second_turn_on_the_context_remembers_the_first(client, server, llm) -> None:
    first = await finished(client, user("remember 7"))
    second = await finished(client, user("what was it?", context_id=first.context_id))
    assert second.id != first.id and second.context_id == first.context_id
    assert answer(second) == "You said 7."
    last = llm.requests[-1].messages
    assert [m["content"] for m in last if m["role"] == "user"][:2] == ["remember 7", "what was it?"]
    sessions = list((server.workspace / "a2a" / ".sessions").glob("*.jsonl"))
    header = [json.loads(p.read_text().splitlines()[0]) for p in sessions]
    assert sum(h.get("a2a_context") == first.context_id for h in header) == 1


async def test_an_idle_conversation_reopens_from_its_session_after_a_restart_too(
    tmp_path: Path, llm: ScriptedLLMServer
) -> None:
    store = SessionStore(tmp_path / "ws" / "a2a" / ".sessions")
    first = A2AServer(tmp_path, llm.base_url, args=("--idle-timeout", "0.5"))
    try:
        async with httpx.AsyncClient(timeout=60) as http:
            client = await create_client(first.url, ClientConfig(httpx_client=http))
            task = await finished(client, user("survive 5"))
            deadline = time.monotonic() + 20
            while store.list()[0].state == "running":  # the idle conversation releases its file
                assert time.monotonic() < deadline, "the idle conversation was not closed"
                await asyncio.sleep(0.05)  # polls the session file's lock; noqa: sleep-ok
            again = await finished(client, user("and now?", context_id=task.context_id))
            assert answer(again) == "It was 5."
    finally:
        assert first.stop() in STOPPED
    second = A2AServer(tmp_path, llm.base_url)  # the same workspace: a restart
    try:
        async with httpx.AsyncClient(timeout=60) as http:
            client = await create_client(second.url, ClientConfig(httpx_client=http))
            third = await finished(client, user("still?", context_id=task.context_id))
    finally:
        assert second.stop() in STOPPED
    assert answer(third) == "Still 5."
    said = [m["content"] for m in llm.requests[-1].messages if m["role"] == "user"]
    assert said[:3] == ["survive 5", "and now?", "still?"]
    assert len(store.list()) == 1  # one conversation, one session file


async def test_a_conversation_another_server_holds_fails_clearly(client, server, llm) -> None:
    held = await finished(client, user("remember 7"))  # the module's server keeps it open
    other = A2AServer(server.tmp, llm.base_url)  # a second server on the same workspace
    try:
        async with httpx.AsyncClient(timeout=60) as http:
            second = await create_client(other.url, ClientConfig(httpx_client=http))
            task = await finished(second, user("and?", context_id=held.context_id))
    finally:
        assert other.stop() in STOPPED
    assert task.status.state == TaskState.TASK_STATE_FAILED
    assert "in use by another process" in task.status.message.parts[0].text


async def test_ask_human_turns_input_required_and_the_answer_resumes_the_run(client, llm) -> None:
    asked = await run(client, user("py ask"))
    assert states(asked[0])[-1] == TaskState.TASK_STATE_INPUT_REQUIRED
    task = asked[1]
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert task.status.message.parts[0].text == "Which color?"
    done = await finished(client, user("blue", task_id=task.id, context_id=task.context_id))
    assert done.id == task.id and done.status.state == TaskState.TASK_STATE_COMPLETED
    assert answer(done) == "You chose blue."
    tool_results = [m for m in llm.requests[-1].messages if m["role"] == "tool"]
    assert tool_results[-1]["content"].strip().endswith("blue")


async def test_cancel_stops_the_run_promptly(client, llm) -> None:
    before = len(llm.requests)
    stream = client.send_message(user("py slow"))
    task_id = (await anext(stream)).task.id
    assert await llm.wait_for_requests_async(before + 1, timeout=30)  # the model is thinking
    started = time.monotonic()
    canceled = await client.cancel_task(CancelTaskRequest(id=task_id))
    assert time.monotonic() - started < 5
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    assert await asyncio.to_thread(llm.wait_for_disconnects, 1, 10)  # the model call was dropped
    rest = await asyncio.wait_for(drain(stream), 10)  # the stream ends
    assert TaskState.TASK_STATE_COMPLETED not in states(rest)
    task = await client.get_task(GetTaskRequest(id=task_id))
    assert task.status.state == TaskState.TASK_STATE_CANCELED


async def test_a_conversation_runs_one_task_at_a_time(client, llm) -> None:
    before = len(llm.requests)
    stream = client.send_message(user("busy first"))
    first = (await anext(stream)).task
    assert await llm.wait_for_requests_async(before + 1, timeout=30)
    second = await finished(client, user("meanwhile", context_id=first.context_id))
    assert second.status.state == TaskState.TASK_STATE_REJECTED
    assert f"busy with task {first.id}" in second.status.message.parts[0].text
    canceled = await client.cancel_task(CancelTaskRequest(id=first.id))
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    await asyncio.wait_for(drain(stream), 10)


async def test_a_run_that_fails_fails_the_task_and_says_why(client) -> None:
    seen, task = await run(client, user("py fail"))
    assert task.status.state == TaskState.TASK_STATE_FAILED
    assert states(seen)[-1] == TaskState.TASK_STATE_FAILED
    assert "API key" in task.status.message.parts[0].text
    assert not task.artifacts  # no answer


async def test_two_tasks_at_once_each_in_its_own_workspace(client, server) -> None:
    done_a, done_b = await asyncio.gather(
        finished(client, user("task A")), finished(client, user("task B"))
    )
    assert (answer(done_a), answer(done_b)) == ("A.", "B.")
    assert done_a.context_id != done_b.context_id
    written = sorted(p.read_text() for p in (server.workspace / "a2a").glob("*/out.txt"))
    assert written == ["A", "B"]
    for task, content in ((done_a, b"A"), (done_b, b"B")):  # what a task wrote comes back
        files = [a for a in task.artifacts if a.metadata["kind"] == "file"]
        assert [(f.name, f.parts[0].raw, f.parts[0].media_type) for f in files] == [
            ("out.txt", content, "text/plain")
        ]


def test_the_legacy_json_rpc_names_still_work(server: A2AServer) -> None:
    """Upstream's clients (A2A 0.2/0.3) send ``message/send``."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "message/send",
        "params": {
            "message": {
                "messageId": "x1",
                "role": "user",
                "parts": [{"kind": "text", "text": "legacy send"}],
            }
        },
    }
    result = httpx.post(server.url, json=body, timeout=60).json()["result"]
    assert result["status"]["state"] == "completed"
    assert result["artifacts"][0]["parts"][0]["text"] == "Old clients work."


def test_the_documented_python_client_runs(server: A2AServer, tmp_path: Path) -> None:
    text = (ROOT / "docs" / "a2a.md").read_text(encoding="utf-8")
    section = text[text.index("## A Python client") :]
    script = tmp_path / "client.py"
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block, "no python block in the section"
    script.write_text(block.group(1))
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env={**child_env(tmp_path), "A2A_URL": server.url},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "[TASK_STATE_WORKING] Checking."
    assert lines[1].startswith("[TASK_STATE_WORKING] Calling python_execute(")
    assert "Answer: 42." in lines and lines[-1] == "Answer: 49."
    assert any(line.endswith("ended TASK_STATE_COMPLETED") for line in lines)


def test_without_the_extra_the_program_names_the_install_command(tmp_path: Path) -> None:
    blocked = "import sys, runpy; sys.modules['a2a'] = None; sys.argv = ['main']; "
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            blocked + "runpy.run_module('protocol.a2a.app.main', run_name='__main__')",
        ],
        capture_output=True,
        text=True,
        env=child_env(tmp_path),
        cwd=ROOT,
        timeout=60,
    )
    assert done.returncode == 2
    assert "pip install -e '.[a2a]'" in done.stderr and "Traceback" not in done.stderr


def test_a_remote_address_needs_allow_remote_and_a_token(tmp_path: Path) -> None:
    for extra, env in [
        (["--host", "0.0.0.0"], {}),
        (["--host", "0.0.0.0", "--allow-remote"], {}),
        (["--host", "0.0.0.0"], {"OPENMANUS_A2A_TOKEN": "t"}),
    ]:
        done = run_program(tmp_path, *extra, env=env)
        assert done.returncode == 2, (extra, env, done.stderr)
        assert "not a loopback address" in done.stderr


# ---- who may talk to it ------------------------------------------------------------------------


def test_a_foreign_host_or_origin_is_refused(server: A2AServer) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}
    port = server.url.rsplit(":", 1)[1].strip("/")
    for headers, status in [
        ({"host": f"evil.example:{port}"}, 421),
        ({"origin": "http://evil.example"}, 403),
        ({"sec-fetch-site": "cross-site"}, 403),
    ]:
        for method, path in [("POST", "/"), ("GET", "/.well-known/agent-card.json")]:
            response = httpx.request(
                method, server.url.rstrip("/") + path, json=body, headers=headers
            )
            assert response.status_code == status, (headers, path, response.text)
    same = httpx.post(server.url, json=body, headers={"origin": server.url.rstrip("/")})
    assert same.status_code == 200 and "error" in same.json()  # no such task, but allowed


async def test_a_token_is_required_when_configured(tmp_path: Path, llm: ScriptedLLMServer) -> None:
    guarded = A2AServer(tmp_path, llm.base_url, env={"OPENMANUS_A2A_TOKEN": "tok-123"})
    try:
        async with httpx.AsyncClient(timeout=60) as http:
            card = (await http.get(guarded.url + ".well-known/agent-card.json")).json()  # public
            scheme = card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"]
            assert scheme == "bearer"
            body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}
            for auth in ({}, {"authorization": "Bearer wrong"}, {"authorization": "tok-123"}):
                response = await http.post(guarded.url, json=body, headers=auth)
                assert response.status_code == 401, (auth, response.text)
                assert response.headers["www-authenticate"] == "Bearer"
        headers = {"authorization": "Bearer tok-123"}
        async with httpx.AsyncClient(timeout=60, headers=headers) as http:
            client = await create_client(guarded.url, ClientConfig(httpx_client=http))
            task = await finished(client, user("token task"))
        assert answer(task) == "Authorized."
    finally:
        assert guarded.stop() in STOPPED


# ---- the JavaScript client ---------------------------------------------------------------------


def test_the_official_js_client_drives_it(server: A2AServer, llm: ScriptedLLMServer) -> None:
    out = run_js("a2a_client.mjs", server.url)
    assert out["send"]["state"] == "TASK_STATE_COMPLETED"
    assert out["send"]["answer"] == "JS answer."
    assert out["second"]["contextId"] == out["send"]["contextId"]
    assert out["second"]["answer"] == "JS second answer."
    stream = out["stream"]
    assert stream[0]["kind"] == "task"
    assert [e["meta"]["kind"] for e in stream if e.get("meta")][:2] == ["tool_call", "tool_result"]
    assert [e["text"] for e in stream if e["kind"] == "artifactUpdate"] == ["Streamed."]
    assert stream[-1]["state"] == "TASK_STATE_COMPLETED"
    assert out["ask"][-1]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert out["ask"][-1]["text"] == "Which color?"
    assert out["answered"]["state"] == "TASK_STATE_COMPLETED"
    assert out["answered"]["answer"] == "Green it is."
    assert out["canceled"]["state"] == "TASK_STATE_CANCELED"
    assert out["afterCancel"]["state"] == "TASK_STATE_CANCELED"
    assert out["cancelSeconds"] < 10


def test_the_documented_js_client_runs(server: A2AServer) -> None:
    text = (ROOT / "docs" / "a2a.md").read_text(encoding="utf-8")
    block = re.search(r"```javascript\n(.*?)```", text, re.S)
    assert block, "no javascript block in docs/a2a.md"
    npm_bin("mcp-inspector")  # fails, naming the setup script, when the npm tools are missing
    # Beside the installed packages, so that its bare imports resolve.
    script = NPM_DIR / f"a2a-docs-example-{os.getpid()}.mjs"
    script.write_text(block.group(1).replace("http://localhost:10000/", server.url))
    try:
        done = subprocess.run(
            ["node", str(script)], capture_output=True, text=True, env=node_env(), timeout=120
        )
    finally:
        script.unlink()
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "TASK_STATE_WORKING "
    assert lines[-2:] == ["Answer: 42, from JavaScript.", "TASK_STATE_COMPLETED "]
