"""The A2A server's limits (issue 34, items 4 and 5), over real HTTP: a request body larger
than ``--max-body`` is refused with a 413 before it is read whole or parsed (declared or
chunked, with or without a token); the task store keeps at most ``--max-tasks`` finished
tasks, ``--task-memory`` of them, each for ``--task-ttl`` seconds, never dropping a task still
under way; listings come in pages bounded by count and size."""

from __future__ import annotations

import asyncio
import json
import select
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.types import GetTaskRequest, ListTasksRequest, TaskState
from a2a.utils.errors import TaskNotFoundError

from app.testing import ScriptedLLMServer, call, tool_calls
from tests.a2a_support import (
    A2AServer,
    a2a_server,
    answer,
    connect,
    events,
    finished,
    scripted_model,
    user,
)

pytestmark = pytest.mark.e2e

MIB = 1 << 20
#: Five files of 1 MiB: one task's artifacts, about 5 MiB.
FIVE_FILES = "for i in range(5): open(f'f{i}.bin', 'wb').write(bytes([i]) * (1 << 20))"
ASK = call("ask_human", {"inquire": "Still there?"})
SCRIPTS: dict[str, list[Any]] = {
    "small": ["Small.", "Small again."],
    "files": [tool_calls(call("python_execute", {"code": FIVE_FILES})), "Five files."],
    "waits": [tool_calls(ASK), "Answered."],
}


llm = scripted_model(SCRIPTS)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, llm: ScriptedLLMServer) -> Iterator[A2AServer]:
    tmp = tmp_path_factory.mktemp("a2a-limits")
    with a2a_server(tmp, llm.base_url, args=("--max-body", "1")) as running:
        yield running


# ---- the body limit ----------------------------------------------------------------------------


def _raw_post(
    server: A2AServer, head: dict[str, str], body_chunks: Iterator[bytes]
) -> tuple[int, int]:
    """POST with a raw socket, sending ``body_chunks`` until the server answers or closes:
    (the answer's status, bytes of body sent)."""
    host, port = server.url.split("//")[1].strip("/").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        lines = ["POST / HTTP/1.1", f"Host: {host}:{port}", "Content-Type: application/json"]
        lines += [f"{k}: {v}" for k, v in head.items()]
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        sent = 0
        for chunk in body_chunks:
            if select.select([sock], [], [], 0)[0]:
                break  # the server answered
            try:
                sock.sendall(chunk)
            except OSError:  # it closed the connection
                break
            sent += len(chunk)
        answer_bytes = b""
        while b"\r\n" not in answer_bytes:
            more = sock.recv(65536)
            if not more:
                break
            answer_bytes += more
    return int(answer_bytes.split(b" ", 2)[1]), sent


def _chunked(total: int, size: int = 64 << 10) -> Iterator[bytes]:
    piece = b"[" * size
    for _ in range(total // size):
        yield f"{size:x}\r\n".encode() + piece + b"\r\n"


def test_a_declared_body_over_the_limit_is_refused_unread(server: A2AServer) -> None:
    status, sent = _raw_post(server, {"Content-Length": str(256 * MIB)}, iter([b"{" * 1024] * 64))
    assert status == 413
    assert sent < 256 * MIB


def test_a_chunked_body_over_the_limit_is_refused_as_it_grows(server: A2AServer) -> None:
    status, sent = _raw_post(server, {"Transfer-Encoding": "chunked"}, _chunked(256 * MIB))
    assert status == 413
    assert sent < 64 * MIB  # stopped near the 1 MiB limit, not after the 256 MiB


def test_the_413_says_what_the_limit_is(server: A2AServer) -> None:
    response = httpx.post(server.url, content=b" " * (MIB + 1), timeout=60)
    assert response.status_code == 413
    assert "1 MiB" in response.json()["error"] and "--max-body" in response.json()["error"]


async def test_the_official_client_gets_a_clear_error_and_small_requests_pass(server) -> None:
    async with connect(server) as client:
        with pytest.raises(Exception, match="413") as caught:
            await finished(client, user("x" * (2 * MIB)))
        assert "Traceback" not in str(caught.value)
        done = await finished(client, user("small"))
    assert answer(done) == "Small."


def test_without_a_token_a_big_body_is_refused_before_it_is_read(
    tmp_path: Path, llm: ScriptedLLMServer
) -> None:
    with a2a_server(tmp_path, llm.base_url, env={"OPENMANUS_A2A_TOKEN": "tok-123456"}) as guarded:
        status, sent = _raw_post(guarded, {"Content-Length": str(256 * MIB)}, _chunked(8 * MIB))
    assert status == 401
    assert sent < 8 * MIB


# ---- the task store ----------------------------------------------------------------------------


async def test_finished_tasks_beyond_the_count_are_forgotten_oldest_first(
    tmp_path: Path, llm: ScriptedLLMServer
) -> None:
    with a2a_server(tmp_path, llm.base_url, args=("--max-tasks", "3")) as small:
        async with connect(small) as client:
            waiting = await finished(client, user("waits"))  # input-required: never dropped
            done = [await finished(client, user("small")) for _ in range(5)]
            listed = await client.list_tasks(ListTasksRequest())
            kept = {t.id for t in listed.tasks}
            assert kept == {waiting.id, done[3].id, done[4].id}
            for old in done[:3]:
                with pytest.raises(TaskNotFoundError):
                    await client.get_task(GetTaskRequest(id=old.id))
            # The waiting task survived and still takes its answer.
            replied = await finished(client, user("yes", task_id=waiting.id))
            assert replied.status.state == TaskState.TASK_STATE_COMPLETED
            # A dropped task's conversation carries on.
            again = await finished(client, user("more", context_id=done[0].context_id))
            assert answer(again) == "Small again."


async def test_finished_tasks_beyond_the_memory_limit_are_forgotten(
    tmp_path: Path, llm: ScriptedLLMServer
) -> None:
    with a2a_server(tmp_path, llm.base_url, args=("--task-memory", "12")) as small:
        async with connect(small) as client:
            tasks = [await finished(client, user("files")) for _ in range(4)]
            kept = [t.id for t in (await client.list_tasks(ListTasksRequest())).tasks]
    assert len(tasks[-1].artifacts) == 6  # five files and the answer
    assert kept == [tasks[3].id, tasks[2].id]  # 2 x 5 MiB fit in 12 MiB, 3 do not


async def test_finished_tasks_are_forgotten_after_their_time(
    tmp_path: Path, llm: ScriptedLLMServer
) -> None:
    with a2a_server(tmp_path, llm.base_url, args=("--task-ttl", "1")) as small:
        async with connect(small) as client:
            seen = await events(client, user("small"))
            task_id = seen[0].task.id
            deadline = time.monotonic() + 30
            while True:
                try:
                    await client.get_task(GetTaskRequest(id=task_id))
                except TaskNotFoundError:
                    break
                assert time.monotonic() < deadline, "the task was never forgotten"
                await asyncio.sleep(0.2)  # polls the store; noqa: sleep-ok
            assert (await client.list_tasks(ListTasksRequest())).tasks == []


async def test_listings_come_in_pages_bounded_by_count_and_size(server: A2AServer) -> None:
    async with connect(server) as client:
        made = [await finished(client, user("files")) for _ in range(3)]
        made += [await finished(client, user("small")) for _ in range(2)]
        mine = {t.id for t in made}

        async def pages(request: ListTasksRequest) -> list[list[str]]:
            found = []
            while True:
                page = await client.list_tasks(request)
                found.append([t.id for t in page.tasks if t.id in mine])
                if not page.next_page_token:
                    return found
                request.page_token = page.next_page_token

        by_count = await pages(ListTasksRequest(page_size=2))
        assert [len(p) for p in by_count if p] == [2, 2, 1]
        # With artifacts, a page holds at most 8 MiB: one task of 5 MiB at a time.
        by_size = await pages(ListTasksRequest(include_artifacts=True, page_size=100))
        heavy = {t.id for t in made[:3]}
        assert sorted(i for p in by_size for i in p) == sorted(mine)
        assert all(len(heavy & set(p)) <= 1 for p in by_size)
        body = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks"}
        async with httpx.AsyncClient(timeout=60) as http:
            raw = await http.post(server.url, json={**body, "params": {"includeArtifacts": True}})
        assert len(raw.content) < 16 * MIB
        assert json.loads(raw.content)["result"]["nextPageToken"]
