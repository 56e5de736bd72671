"""Callers of the A2A server are apart (issue 34, item 2): a second caller with a token of its
own, knowing the first one's task and context ids, tries every method on them with the
official clients (a2a-sdk's and @a2a-js/sdk's) over real HTTP, and learns nothing: each id is
"not found", exactly as a made-up one; the same context id is a conversation of its own, in a
workspace of its own. Without tokens the server keeps one owner (single-user loopback)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from a2a.types import (
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    SendMessageConfiguration,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import A2AError, TaskNotFoundError

from app.testing import ScriptedLLMServer, call, slow, text, tool_calls
from tests.a2a_support import (
    A2AServer,
    Webhook,
    a2a_server,
    answer,
    connect,
    drain,
    finished,
    kinds,
    run,
    run_js,
    run_program,
    scripted_model,
    user,
    webhook,
)

pytestmark = pytest.mark.e2e

ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdefgh"
DEFAULT = "default-token-0123456789abc"
SECRET = "alice-secret-42"
SCRIPTS: dict[str, list[Any]] = {
    "alice writes": [
        tool_calls(call("python_execute", {"code": f"open('secret.txt', 'w').write({SECRET!r})"})),
        "Written.",
    ],
    "alice slow": [slow(60, text("too late"))],
    "alice plan": ["Planned."],
    "bob reads": [
        tool_calls(call("python_execute", {"code": "print(open('secret.txt').read())"})),
        "Read.",
    ],
    "bob meanwhile": ["Bob's own."],
    "default task": ["Default's."],
    "shared one": ["One."],
}


llm = scripted_model(SCRIPTS)


hook = webhook()


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, llm: ScriptedLLMServer, hook: Webhook
) -> Iterator[A2AServer]:
    tmp = tmp_path_factory.mktemp("a2a-callers")
    tokens = tmp / "tokens"
    tokens.write_text(f"# name token\nalice {ALICE}\nbob   {BOB}\n")
    tokens.chmod(0o600)
    args = ("--tokens-file", str(tokens), "--allow-push-target", f"127.0.0.1:{hook.port}")
    with a2a_server(tmp, llm.base_url, env={"OPENMANUS_A2A_TOKEN": DEFAULT}, args=args) as s:
        yield s


async def _refusal(call: Any) -> str:
    """The error ``call`` ends with (it must end with one)."""
    with pytest.raises(A2AError) as caught:
        await (drain(call) if hasattr(call, "__aiter__") else call)
    return f"{type(caught.value).__name__}: {caught.value}"


async def test_another_callers_ids_are_unknown_for_every_method(server, hook, llm) -> None:
    async with connect(server, ALICE) as alice, connect(server, BOB) as bob:
        done = await finished(alice, user("alice plan"))
        before = len(llm.requests)
        request = user("alice slow")
        push = TaskPushNotificationConfig(url=hook.url, token="alice-push-token")
        request.configuration.CopyFrom(SendMessageConfiguration(task_push_notification_config=push))
        stream = alice.send_message(request)
        running = (await anext(stream)).task
        assert await llm.wait_for_requests_async(before + 1, timeout=30)  # it is working
        unknown = str(uuid.uuid4())

        async def attempts(task_id: str, context_id: str) -> list[str]:
            bob_hook = TaskPushNotificationConfig(task_id=task_id, url=hook.url, token="bob")
            return [
                await _refusal(bob.get_task(GetTaskRequest(id=task_id))),
                await _refusal(bob.cancel_task(CancelTaskRequest(id=task_id))),
                await _refusal(bob.subscribe(SubscribeToTaskRequest(id=task_id))),
                await _refusal(
                    bob.list_task_push_notification_configs(
                        ListTaskPushNotificationConfigsRequest(task_id=task_id)
                    )
                ),
                await _refusal(
                    bob.get_task_push_notification_config(
                        GetTaskPushNotificationConfigRequest(task_id=task_id, id=task_id)
                    )
                ),
                await _refusal(bob.create_task_push_notification_config(bob_hook)),
                await _refusal(
                    bob.delete_task_push_notification_config(
                        DeleteTaskPushNotificationConfigRequest(task_id=task_id, id=task_id)
                    )
                ),
                await _refusal(
                    bob.send_message(user("bob", task_id=task_id, context_id=context_id))
                ),
                await _refusal(bob.send_message(user("bob", task_id=task_id))),
            ]

        for task in (running, done):
            seen = await attempts(task.id, task.context_id)
            made_up = await attempts(unknown, task.context_id)
            # Word for word what a made-up id gets: nothing says the id exists.
            assert [s.replace(task.id, "ID") for s in seen] == [
                s.replace(unknown, "ID") for s in made_up
            ]
            assert all(s.startswith(TaskNotFoundError.__name__) for s in seen), seen
            assert not any("forbidden" in s.lower() for s in seen)
        assert (await bob.list_tasks(ListTasksRequest())).tasks == []
        mine = await alice.list_tasks(ListTasksRequest())
        assert {t.id for t in mine.tasks} == {done.id, running.id}
        # Alice's task ran on, untouched; her webhook config is still hers alone.
        still = await alice.get_task(GetTaskRequest(id=running.id))
        assert still.status.state == TaskState.TASK_STATE_WORKING
        configs = await alice.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=running.id)
        )
        assert [(c.url, c.token) for c in configs.configs] == [(hook.url, "alice-push-token")]
        # Bob on Alice's busy context is not told it is busy (that would name her task).
        own = await finished(bob, user("bob meanwhile", context_id=running.context_id))
        assert own.status.state == TaskState.TASK_STATE_COMPLETED
        assert answer(own) == "Bob's own."
        canceled = await alice.cancel_task(CancelTaskRequest(id=running.id))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        await asyncio.wait_for(drain(stream), 10)
    assert hook.wait_for(running.id)
    assert {h.get("X-A2A-Notification-Token") for _, h in hook.received} == {"alice-push-token"}


async def test_the_same_context_id_is_another_conversation_in_another_workspace(
    server, llm
) -> None:
    async with connect(server, ALICE) as alice, connect(server, BOB) as bob:
        wrote = await finished(alice, user("alice writes"))
        assert wrote.status.state == TaskState.TASK_STATE_COMPLETED
        seen, read = await run(bob, user("bob reads", context_id=wrote.context_id))
    assert read.status.state == TaskState.TASK_STATE_COMPLETED
    assert read.context_id == wrote.context_id  # the id is Bob's too, the conversation is not
    results = [
        e.status_update.status.message.parts[0].text for e in seen if kinds([e]) == ["tool_result"]
    ]
    assert "FileNotFoundError" in results[0] and SECRET not in str(seen)
    bob_requests = [r.messages for r in llm.requests if "bob reads" in json.dumps(r.messages)]
    assert bob_requests and not any("alice writes" in json.dumps(m) for m in bob_requests)
    callers = server.workspace / "a2a" / "callers"
    assert [p.read_text() for p in (callers / "alice").glob("*/secret.txt")] == [SECRET]
    assert not list((callers / "bob").glob("*/secret.txt"))
    headers = [
        json.loads(p.read_text().splitlines()[0])
        for p in callers.glob("*/.sessions/*.jsonl")
        if wrote.context_id in p.read_text().splitlines()[0]
    ]
    assert sorted(h["a2a_caller"] for h in headers) == ["alice", "bob"]


async def test_the_environment_token_is_a_caller_of_its_own(server) -> None:
    async with connect(server, DEFAULT) as default, connect(server, ALICE) as alice:
        task = await finished(default, user("default task"))
        assert answer(task) == "Default's."
        assert task.id not in {t.id for t in (await alice.list_tasks(ListTasksRequest())).tasks}
        with pytest.raises(TaskNotFoundError):
            await alice.get_task(GetTaskRequest(id=task.id))
    # Its conversations stay where a server with one token has always kept them.
    sessions = server.workspace / "a2a" / ".sessions"
    assert any(task.context_id in p.read_text() for p in sessions.glob("*.jsonl"))


def test_the_official_js_client_as_a_second_caller_learns_nothing(server, hook, llm) -> None:
    async def alices_task() -> Any:
        async with connect(server, ALICE) as alice:
            return await finished(alice, user("alice plan"))

    task = asyncio.run(alices_task())
    out = run_js("a2a_intruder.mjs", server.url, BOB, task.id, task.context_id, hook.url)
    assert task.id not in out.pop("list")
    unknown = out.pop("unknownGet")
    assert unknown.startswith("error:") and "not found" in unknown.lower()
    for name, outcome in out.items():
        assert outcome.startswith("error:") and "not found" in outcome.lower(), (name, outcome)
        assert task.context_id not in outcome


async def test_without_tokens_there_is_one_owner(tmp_path: Path, llm: ScriptedLLMServer) -> None:
    """A loopback server without tokens is single-user: every client is that user."""
    with a2a_server(tmp_path, llm.base_url) as open_server:
        async with connect(open_server) as first, connect(open_server) as second:
            task = await finished(first, user("shared one"))
            seen = await second.get_task(GetTaskRequest(id=task.id))
    assert seen.id == task.id and answer(seen) == "One."


@pytest.mark.parametrize(
    ("content", "mode", "expected"),
    [
        (f"alice {ALICE}\n", 0o644, "chmod 600"),
        ("alice short\n", 0o600, "shorter than 16"),
        (f"alice {ALICE}\nalice {BOB}\n", 0o600, "two callers are named alice"),
        (f"alice {ALICE}\nbob {ALICE}\n", 0o600, "the same token"),
        (f"default {ALICE}\n", 0o600, "'default' is the name of OPENMANUS_A2A_TOKEN"),
        ("al/ice token-0123456789abcdef\n", 0o600, "expected '<name> <token>'"),
        ("# nobody\n", 0o600, "names no caller"),
    ],
)
def test_a_bad_tokens_file_is_refused_saying_why(
    tmp_path: Path, content: str, mode: int, expected: str
) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(content)
    tokens.chmod(mode)
    done = run_program(tmp_path, "--tokens-file", str(tokens))
    assert done.returncode == 2, done.stderr
    assert expected in done.stderr and "Traceback" not in done.stderr
    assert ALICE not in done.stderr and BOB not in done.stderr


def test_a_tokens_file_is_a_token_for_allow_remote(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("")
    tokens.chmod(0o600)
    remote = ("--host", "0.0.0.0", "--allow-remote")
    done = run_program(tmp_path, *remote, "--tokens-file", str(tokens))
    # Past the remote check, refused on the file itself (not a caller in it).
    assert done.returncode == 2 and "names no caller" in done.stderr, done.stderr
