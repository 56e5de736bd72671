"""What the A2A server sends and how it reads what it gets (issue 34: item 6's A2A part and
the "also found" items), over real HTTP with a2a-sdk's client and with raw JSON-RPC as curl
and the a2a-tck send it:

* nothing a client receives (status updates, artifacts, files, listings, webhooks) carries
  the API key, wherever the model put it (text, tool arguments, call ids, files);
* a reply naming only its task continues that task (A2A 1.0, 3.4.3), and the conversation is
  never left busy after its task ended;
* upstream's README example (``"messageId": ""``) is answered;
* 1.0 method names without an ``A2A-Version`` header are answered as 1.0.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from a2a.types import (
    CancelTaskRequest,
    ListTasksRequest,
    SendMessageConfiguration,
    TaskPushNotificationConfig,
    TaskState,
)
from google.protobuf.json_format import MessageToJson

from app.testing import ScriptedLLMServer, call, tool_calls
from tests.a2a_support import (
    A2AServer,
    Webhook,
    a2a_server,
    answer,
    connect,
    finished,
    kinds,
    rpc,
    run,
    scripted_model,
    user,
    webhook,
)
from tests.conftest import TEST_API_KEY

pytestmark = pytest.mark.e2e

KEY = TEST_API_KEY
LEAK_CODE = (
    f"open('key.txt', 'w').write('key={KEY}')\n"
    f"open('key.bin', 'wb').write(bytes([0, 255, 7]) + {KEY!r}.encode())\n"
    f"print('the key is', {KEY!r})"
)
ASK = call("ask_human", {"inquire": "Which color?"})
SCRIPTS: dict[str, list[Any]] = {
    "leak it": [
        tool_calls(
            call("python_execute", {"code": LEAK_CODE}, id=f"call_{KEY}"),
            content=f"I will use {KEY} now.",
        ),
        f"Done; the key was {KEY}.",
    ],
    "ask by task": [tool_calls(ASK), "You chose it.", "Second task done."],
    "ask then cancel": [tool_calls(ASK), "Fresh start."],
    "Upstream example": ["Upstream answered."],
    "empty id 1.0": ["Empty id answered."],
    "no header": ["No header needed."],
    "no header stream": ["Streamed without a header."],
}


llm = scripted_model(SCRIPTS)


hook = webhook()


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, llm: ScriptedLLMServer, hook: Webhook
) -> Iterator[A2AServer]:
    tmp = tmp_path_factory.mktemp("a2a-protocol")
    args = ("--allow-push-target", f"127.0.0.1:{hook.port}")
    with a2a_server(tmp, llm.base_url, args=args) as running:
        yield running


def _key_forms() -> list[str]:
    raw = KEY.encode()
    return [KEY, base64.b64encode(raw).decode()[:-4], base64.b64encode(b"\0" + raw).decode()[4:-4]]


# ---- redaction ---------------------------------------------------------------------------------


async def test_nothing_a_client_receives_carries_the_key(server, hook, llm) -> None:
    request = user("leak it")
    push = TaskPushNotificationConfig(url=hook.url, token="t")
    request.configuration.CopyFrom(SendMessageConfiguration(task_push_notification_config=push))
    async with connect(server) as client:
        seen, task = await run(client, request)
        listed = await client.list_tasks(ListTasksRequest(include_artifacts=True))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert hook.wait_for("TASK_STATE_COMPLETED")
    received = [
        *(MessageToJson(e) for e in seen),
        MessageToJson(task),
        MessageToJson(listed),
        *(json.dumps(body) for body, _ in hook.received),
    ]
    for text in received:
        for form in _key_forms():
            assert form not in text
    # The model really sent it everywhere, and the client got the rest of it.
    assert any(KEY in json.dumps(r.messages) for r in llm.requests)
    assert {"thought", "tool_call", "tool_result"} <= set(kinds(seen))
    artifacts = {a.name: a for a in task.artifacts}
    assert artifacts[f"task_{task.id}"].parts[0].text == "Done; the key was ***."
    files = {a.name: a for a in task.artifacts if a.metadata["kind"] == "file"}
    assert files["key.txt"].parts[0].raw == b"key=***"
    assert files["key.txt"].metadata["redacted"] is True
    assert files["key.bin"].parts[0].text.startswith("key.bin: withheld")


# ---- a reply naming only its task --------------------------------------------------------------


async def test_a_reply_with_only_the_task_id_continues_its_conversation(server, llm) -> None:
    async with connect(server) as client:
        asked = await finished(client, user("ask by task"))
        assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        replied = await finished(client, user("green", task_id=asked.id))  # no context id
        assert replied.id == asked.id and replied.context_id == asked.context_id
        assert replied.status.state == TaskState.TASK_STATE_COMPLETED
        assert answer(replied) == "You chose it."
        tool_results = [m for m in llm.requests[-1].messages if m["role"] == "tool"]
        assert tool_results[-1]["content"].strip().endswith("green")
        # The conversation is free again: a new task in it runs (it was REJECTED as busy).
        second = await finished(client, user("next", context_id=asked.context_id))
    assert second.status.state == TaskState.TASK_STATE_COMPLETED
    assert answer(second) == "Second task done."


def test_a_legacy_reply_with_only_the_task_id_continues_too(server: A2AServer) -> None:
    """The same over 0.3's ``message/send`` (upstream's clients)."""

    def send(text: str, **ids: str) -> dict[str, Any]:
        message = {"messageId": text, "role": "user", "parts": [{"kind": "text", "text": text}]}
        reply = rpc(server, "message/send", {"message": {**message, **ids}})
        assert "result" in reply, reply
        return reply["result"]

    asked = send("ask by task")
    assert asked["status"]["state"] == "input-required"
    replied = send("red", taskId=asked["id"])
    assert replied["contextId"] == asked["contextId"]
    assert replied["status"]["state"] == "completed"
    second = send("next", contextId=asked["contextId"])
    assert second["status"]["state"] == "completed"


async def test_a_cancelled_question_leaves_the_conversation_free(server) -> None:
    async with connect(server) as client:
        asked = await finished(client, user("ask then cancel"))
        assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        canceled = await client.cancel_task(CancelTaskRequest(id=asked.id))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        again = await finished(client, user("again", context_id=asked.context_id))
    assert again.status.state == TaskState.TASK_STATE_COMPLETED
    assert answer(again) == "Fresh start."


# ---- what other clients send -------------------------------------------------------------------


def test_upstreams_readme_example_with_an_empty_message_id_is_answered(server) -> None:
    """Upstream's README: ``"messageId": ""``, a part without ``kind``, no version header."""
    body = {
        "id": 130,
        "jsonrpc": "2.0",
        "method": "message/send",
        "params": {
            "message": {"messageId": "", "role": "user", "parts": [{"text": "Upstream example"}]}
        },
    }
    reply = httpx.post(server.url, json=body, timeout=60).json()
    assert reply["id"] == 130 and "result" in reply, reply
    result = reply["result"]
    assert result["status"]["state"] == "completed"
    assert result["artifacts"][-1]["parts"][0]["text"] == "Upstream answered."
    assert result["history"][0]["messageId"]  # one was made up for it
    message = {"messageId": "", "role": "ROLE_USER", "parts": [{"text": "empty id 1.0"}]}
    reply = rpc(server, "SendMessage", {"message": message}, **{"A2A-Version": "1.0"})
    assert reply["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    missing = rpc(server, "SendMessage", {"message": {"role": "ROLE_USER", "parts": []}})
    assert missing["error"]["code"] == -32602  # an absent id is still the client's mistake


def test_1_0_method_names_without_a_version_header_are_answered(server) -> None:
    """The a2a-tck sends 1.0's names with no ``A2A-Version``: the name says the version."""
    message = {"messageId": "tck-1", "role": "ROLE_USER", "parts": [{"text": "no header"}]}
    sent = rpc(server, "SendMessage", {"message": message})
    assert "result" in sent, sent
    task = sent["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    got = rpc(server, "GetTask", {"id": task["id"]})
    assert got["result"]["id"] == task["id"]
    listed = rpc(server, "ListTasks", {"pageSize": 100})
    assert task["id"] in [t["id"] for t in listed["result"]["tasks"]]
    cancel = rpc(server, "CancelTask", {"id": task["id"]})
    assert cancel["error"]["code"] == -32002  # not cancelable: finished (not -32009)
    unknown = rpc(server, "GetTask", {"id": "no-such-task"})
    assert unknown["error"]["code"] == -32001
    # A header that says another version is still taken at its word.
    refused = rpc(server, "GetTask", {"id": task["id"]}, **{"A2A-Version": "0.3"})
    assert refused["error"]["code"] == -32009


def test_a_1_0_stream_without_a_version_header_streams(server) -> None:
    message = {"messageId": "tck-2", "role": "ROLE_USER", "parts": [{"text": "no header stream"}]}
    params = {"message": message}
    body = {"jsonrpc": "2.0", "id": 2, "method": "SendStreamingMessage", "params": params}
    with httpx.stream("POST", server.url, json=body, timeout=60) as response:
        data = [json.loads(line[5:]) for line in response.iter_lines() if line.startswith("data:")]
    assert all("result" in d for d in data), data
    last = data[-1]["result"]
    assert last["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
