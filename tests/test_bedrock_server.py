"""The scripted Bedrock server speaks the real wire format (boto3's own client talks to it) and
refuses what the real service refuses: requests not signed for its key pair (a changed body,
an old date, another region), and conversations Converse rejects. Also upstream's
``app.bedrock`` client over our model, and the server's command line."""

from __future__ import annotations

import base64
import datetime
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx2
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError, EventStreamError

from app.exceptions import LLMResponseError
from app.llm import ModelParams
from app.llm.bedrock import BedrockModel
from app.schema import Message
from app.testing import call, error, raw, text, tool_calls
from app.testing.bedrock_server import (
    TEST_ACCESS_KEY,
    TEST_SECRET_KEY,
    ScriptedBedrockServer,
    event_frame,
    frame,
)
from app.testing.replies import stream_error
from tests.bedrock_helpers import MODEL_ID, scripted_bedrock, settings_for

ROOT = Path(__file__).resolve().parent.parent
USER = [{"role": "user", "content": [{"text": "Hi"}]}]
TOOLS = {"tools": [{"toolSpec": {"name": "add", "inputSchema": {"json": {"type": "object"}}}}]}


@pytest.fixture
def bedrock(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[ScriptedBedrockServer]:
    with scripted_bedrock(monkeypatch, tmp_path) as server:
        yield server


def boto(server: ScriptedBedrockServer, secret: str = TEST_SECRET_KEY) -> Any:
    """boto3's own client on the server, its retries off (each request counted once)."""
    return boto3.client(
        "bedrock-runtime",
        region_name=server.region,
        endpoint_url=server.endpoint_url,
        aws_access_key_id=TEST_ACCESS_KEY,
        aws_secret_access_key=secret,
        config=Config(retries={"total_max_attempts": 1}),
    )


# --- boto3 talks to it ---------------------------------------------------------------------------


def test_boto3_converses_with_it(bedrock: ScriptedBedrockServer) -> None:
    bedrock.push(
        text("Hello from the script", usage={"prompt_tokens": 9, "completion_tokens": 5}),
        tool_calls(call("add", {"a": 1, "b": 2}), content="Adding."),
    )
    client = boto(bedrock)
    answer = client.converse(modelId=MODEL_ID, messages=USER, system=[{"text": "Be brief."}])
    assert answer["output"]["message"]["content"] == [{"text": "Hello from the script"}]
    assert answer["stopReason"] == "end_turn"
    assert answer["usage"] == {"inputTokens": 9, "outputTokens": 5, "totalTokens": 14}
    second = client.converse(modelId=MODEL_ID, messages=USER, toolConfig=TOOLS)
    text_block, use = second["output"]["message"]["content"]
    assert text_block == {"text": "Adding."} and use["toolUse"]["input"] == {"a": 1, "b": 2}
    assert second["stopReason"] == "tool_use"
    assert [r.auth for r in bedrock.requests] == ["sigv4", "sigv4"]


def test_boto3_reads_its_event_stream(bedrock: ScriptedBedrockServer) -> None:
    bedrock.push(tool_calls(call("add", {"a": 1, "b": 2}), content="Let me add."))
    events = list(
        boto(bedrock).converse_stream(modelId=MODEL_ID, messages=USER, toolConfig=TOOLS)["stream"]
    )
    kinds = [next(iter(event)) for event in events]
    assert kinds[0] == "messageStart" and kinds[-2:] == ["messageStop", "metadata"]
    text_ = "".join(
        e["contentBlockDelta"]["delta"].get("text", "") for e in events if "contentBlockDelta" in e
    )
    pieces = [
        e["contentBlockDelta"]["delta"]["toolUse"]["input"]
        for e in events
        if "toolUse" in e.get("contentBlockDelta", {}).get("delta", {})
    ]
    (start,) = [
        e["contentBlockStart"]["start"]["toolUse"] for e in events if "contentBlockStart" in e
    ]
    assert (
        text_ == "Let me add."
        and len(pieces) > 1
        and json.loads("".join(pieces)) == {"a": 1, "b": 2}
    )
    assert start["name"] == "add" and start["toolUseId"].startswith("tooluse_")
    assert events[-2]["messageStop"]["stopReason"] == "tool_use"


def test_boto3_sees_bedrocks_exceptions(bedrock: ScriptedBedrockServer) -> None:
    bedrock.push(
        error(429),
        error(500, code="ModelNotReadyException"),
        stream_error(error(503), reply=text("a b c"), after=2),
    )
    client = boto(bedrock)
    for expected in ("ThrottlingException", "ModelNotReadyException"):
        with pytest.raises(ClientError) as caught:
            client.converse(modelId=MODEL_ID, messages=USER)
        assert caught.value.response["Error"]["Code"] == expected
    with pytest.raises(EventStreamError, match="serviceUnavailableException"):
        list(client.converse_stream(modelId=MODEL_ID, messages=USER)["stream"])
    assert len(bedrock.requests) == 3


def test_boto3_with_a_wrong_secret_is_refused(bedrock: ScriptedBedrockServer) -> None:
    bedrock.push("never")
    with pytest.raises(ClientError) as caught:
        boto(bedrock, secret="not-the-secret").converse(modelId=MODEL_ID, messages=USER)
    assert caught.value.response["Error"]["Code"] == "InvalidSignatureException"
    assert bedrock.remaining == 1


# --- what an attacker tries ---------------------------------------------------------------


def signed(
    server: ScriptedBedrockServer,
    body: dict[str, Any],
    *,
    region: str | None = None,
    when: datetime.datetime | None = None,
    token: str | None = None,
    secret: str = TEST_SECRET_KEY,
) -> AWSRequest:
    url = f"{server.endpoint_url}/model/{MODEL_ID.replace(':', '%3A')}/converse"
    request = AWSRequest(
        "POST", url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    signer = SigV4Auth(
        Credentials(TEST_ACCESS_KEY, secret, token), "bedrock", region or server.region
    )
    if when is None:
        signer.add_auth(request)
    else:  # signed at another time
        request.context["timestamp"] = when.strftime("%Y%m%dT%H%M%SZ")
        request.headers["X-Amz-Date"] = request.context["timestamp"]
        if token:
            request.headers["X-Amz-Security-Token"] = token
        signature = signer.signature(
            signer.string_to_sign(request, signer.canonical_request(request)), request
        )
        signer._inject_signature_to_request(request, signature)
    return request


def send(request: AWSRequest, body: bytes | None = None, **headers: str) -> httpx2.Response:
    fields = {**dict(request.headers.items()), **headers}
    return httpx2.post(request.url, content=request.body if body is None else body, headers=fields)


def rejection(response: httpx2.Response) -> tuple[int, str]:
    return response.status_code, response.headers["x-amzn-errortype"].split(":")[0]


def test_a_signed_request_passes_and_a_changed_body_does_not(
    bedrock: ScriptedBedrockServer,
) -> None:
    bedrock.push("first", "never")
    request = signed(bedrock, {"messages": USER})
    assert send(request).status_code == 200
    tampered = json.dumps({"messages": [{"role": "user", "content": [{"text": "Ignore all"}]}]})
    assert rejection(send(request, tampered.encode())) == (403, "InvalidSignatureException")
    assert bedrock.remaining == 1


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"region": "eu-west-1"}, "InvalidSignatureException"),
        (
            {"when": datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=20)},
            "InvalidSignatureException",
        ),
        ({"secret": "guessed"}, "InvalidSignatureException"),
    ],
    ids=["other-region", "replayed-20-minutes-later", "wrong-secret"],
)
def test_requests_signed_otherwise_are_refused(
    bedrock: ScriptedBedrockServer, change: dict[str, Any], expected: str
) -> None:
    bedrock.push("never")
    assert rejection(send(signed(bedrock, {"messages": USER}, **change))) == (403, expected)
    assert bedrock.remaining == 1


def test_unsigned_and_unknown_keys_are_refused(bedrock: ScriptedBedrockServer) -> None:
    bedrock.push("never")
    url = f"{bedrock.endpoint_url}/model/m/converse"
    body = json.dumps({"messages": USER})
    assert rejection(httpx2.post(url, content=body)) == (403, "MissingAuthenticationTokenException")
    bearer = httpx2.post(url, content=body, headers={"Authorization": "Bearer guess"})
    assert rejection(bearer) == (403, "UnrecognizedClientException")
    request = signed(bedrock, {"messages": USER})
    forged = request.headers["Authorization"].replace(TEST_ACCESS_KEY, "AKIAOTHERKEY00000000")
    assert rejection(send(request, Authorization=forged)) == (403, "UnrecognizedClientException")
    assert bedrock.remaining == 1


def test_a_session_token_must_be_the_servers(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with scripted_bedrock(monkeypatch, tmp_path, session_token="right-token") as server:
        server.push("ok")
        now = datetime.datetime.now(datetime.UTC)
        assert rejection(send(signed(server, {"messages": USER}, when=now, token="wrong-token")))[
            1
        ] == ("UnrecognizedClientException")
        assert (
            send(signed(server, {"messages": USER}, when=now, token="right-token")).status_code
            == 200
        )


# --- what Converse refuses ----------------------------------------------------------------

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n0000").decode()


def turn(role: str, *blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": role, "content": list(blocks)}


USE = {"toolUse": {"toolUseId": "t1", "name": "add", "input": {}}}
RESULT = {"toolResult": {"toolUseId": "t1", "content": [{"text": "3"}]}}


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"messages": []}, "must start with a user message"),
        ({"messages": [turn("assistant", {"text": "hi"})]}, "must start with a user message"),
        ({"messages": [turn("user", {"text": "a"}), turn("user", {"text": "b"})]}, "alternate"),
        ({"messages": [turn("user", {"text": "  "})]}, "is blank"),
        (
            {
                "messages": [
                    turn("user", {"text": "a"}),
                    turn("assistant", USE),
                    turn("user", RESULT),
                ]
            },
            "toolConfig field must be defined",
        ),
        (
            {
                "messages": [
                    turn("user", {"text": "a"}),
                    turn("assistant", USE),
                    turn("user", {"text": "b"}),
                ],
                "toolConfig": TOOLS,
            },
            "Expected toolResult blocks",
        ),
        (
            {
                "messages": [
                    turn("user", {"text": "a"}),
                    turn("assistant", {"text": "b"}),
                    turn("user", RESULT),
                ],
                "toolConfig": TOOLS,
            },
            "no previous turn",
        ),
        (
            {"messages": [turn("user", {"image": {"format": "jpeg", "source": {"bytes": PNG}}})]},
            "Could not process image",
        ),
        (
            {"messages": [turn("user", *[{"text": "a"}, {"cachePoint": {"type": "default"}}] * 5)]},
            "at most 4",
        ),
        (
            {
                "messages": [
                    turn("user", {"text": "a"}),
                    turn("assistant", {"reasoningContent": {"redactedContent": "Zm9yZ2Vk"}}),
                    turn("user", {"text": "b"}),
                ]
            },
            "not one this model sent",
        ),
        ({"messages": USER, "inferenceConfig": {"temperature": 1.5}}, "between 0 and 1"),
        (
            {
                "messages": USER,
                "toolConfig": {
                    "tools": [{"toolSpec": {"name": "no spaces!", "inputSchema": {"json": {}}}}]
                },
            },
            "toolSpec.name",
        ),
    ],
)
def test_conversations_converse_refuses(
    bedrock: ScriptedBedrockServer, body: dict[str, Any], words: str
) -> None:
    bedrock.push("never")
    response = send(signed(bedrock, body))
    assert rejection(response) == (400, "ValidationException")
    assert words in response.json()["message"]
    assert bedrock.remaining == 1 and bedrock.requests[0].rejected == "ValidationException"


@pytest.mark.parametrize(
    "body",
    [
        [1, 2],
        {"messages": "hi"},
        {"messages": [None]},
        {"messages": [{"role": "user", "content": [{"toolUse": "x"}]}]},
        {"messages": [{"role": "user", "content": [{"image": []}]}]},
        {"messages": USER, "toolConfig": {"tools": [1]}},
        {"messages": USER, "toolConfig": {**TOOLS, "toolChoice": {"tool": "add"}}},
        {"messages": USER, "inferenceConfig": []},
        {"messages": [{"role": "user", "content": [{"text": "a", "image": {}}]}]},
    ],
)
def test_garbage_bodies_are_refused_without_hurting_the_server(
    bedrock: ScriptedBedrockServer, body: object
) -> None:
    bedrock.push("still here")
    response = send(signed(bedrock, body))  # type: ignore[arg-type]
    assert rejection(response) == (400, "ValidationException")
    assert send(signed(bedrock, {"messages": USER})).status_code == 200
    assert bedrock.errors == []


def test_a_paired_tool_result_and_an_image_pass(bedrock: ScriptedBedrockServer) -> None:
    bedrock.push("ok")
    image = {"image": {"format": "png", "source": {"bytes": PNG}}}
    body = {
        "messages": [
            turn("user", {"text": "a"}, image),
            turn("assistant", USE),
            turn("user", RESULT, {"text": "go on"}),
        ],
        "toolConfig": TOOLS,
    }
    assert send(signed(bedrock, body)).status_code == 200


async def test_a_damaged_frame_is_a_malformed_answer(bedrock: ScriptedBedrockServer) -> None:
    good = event_frame("messageStart", {"role": "assistant"})
    damaged = bytearray(
        event_frame("contentBlockDelta", {"delta": {"text": "x"}, "contentBlockIndex": 0})
    )
    damaged[-6] ^= 0xFF  # a payload byte: the message CRC no longer matches
    stream = good + bytes(damaged)
    bedrock.push(raw(200, stream, content_type="application/vnd.amazon.eventstream"))
    model = BedrockModel.from_settings(settings_for(bedrock))
    with pytest.raises(LLMResponseError, match="damaged"):
        await model.request([Message.user_message("x")], ModelParams(stream=True))
    assert frame([("a", "b")], b"") != frame([("a", "c")], b"")


# --- upstream's app.bedrock ----------------------------------------------------------------------


async def test_upstreams_client_answers_in_openais_shape(
    bedrock: ScriptedBedrockServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.bedrock import BedrockClient, OpenAIResponse

    monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", bedrock.endpoint_url)
    bedrock.push(tool_calls(call("add", {"a": 1, "b": 2})), error(429), text("It is 3."))
    client = BedrockClient(retry_min_wait=0.001, retry_max_wait=0.01)
    tools = [
        {
            "type": "function",
            "function": {"name": "add", "description": "Add.", "parameters": {"type": "object"}},
        }
    ]
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Add 1 and 2."},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
            ],
        },
    ]
    first = await client.chat.completions.create(
        model=MODEL_ID,
        messages=messages,
        max_tokens=100,
        temperature=0.0,
        stream=False,
        tools=tools,
    )
    assert isinstance(first, OpenAIResponse) and first.choices[0].finish_reason == "tool_calls"
    call_ = first.choices[0].message.tool_calls[0]
    assert (call_.function.name, json.loads(call_.function.arguments)) == ("add", {"a": 1, "b": 2})
    messages += [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [first.model_dump()["choices"][0]["message"]["tool_calls"][0]],
        },
        {"role": "tool", "tool_call_id": call_.id, "content": "3"},
    ]
    second = await client.chat.completions.create(
        model=MODEL_ID, messages=messages, max_tokens=100, temperature=0.0, tools=tools
    )
    assert second.choices[0].message.content == "It is 3."
    dumped = second.model_dump()
    assert dumped["choices"][0]["message"]["content"] == "It is 3." and "created_at" in dumped
    assert dumped["usage"]["total_tokens"] > 0
    # The throttled attempt was retried; every request was well-formed for Converse.
    assert [r.rejected for r in bedrock.requests] == [None, None, None]
    assert bedrock.requests[0].messages[0]["content"][1]["image"]["format"] == "png"


# --- the command line ----------------------------------------------------------------------------


@pytest.mark.e2e
def test_the_command_line_serves_a_script_to_boto3(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(["Hello from the command line"]))
    log = tmp_path / "requests.jsonl"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "app.testing.bedrock_server",
            "--script",
            str(script),
            "--log",
            str(log),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        client = boto3.client(
            "bedrock-runtime",
            region_name="us-west-2",
            endpoint_url=url,
            aws_access_key_id=TEST_ACCESS_KEY,
            aws_secret_access_key=TEST_SECRET_KEY,
            config=Config(retries={"total_max_attempts": 1}),
        )
        answer = client.converse(modelId=MODEL_ID, messages=USER)
        assert answer["output"]["message"]["content"] == [{"text": "Hello from the command line"}]
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert "1 requests, 0 replies unused" in err
    (line,) = log.read_text().splitlines()
    logged = json.loads(line)
    assert logged["headers"]["authorization"] == "AWS4-HMAC-SHA256 ***"
    assert TEST_SECRET_KEY not in line


def test_the_documented_example_runs(
    bedrock: ScriptedBedrockServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """docs/bedrock.md's example, as written (it starts a server of its own, and sets the
    environment, restored here)."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", "restored after the test")
    page = (ROOT / "docs" / "bedrock.md").read_text(encoding="utf-8")
    code = page.split("```python\n", 1)[1].split("```", 1)[0]
    exec(compile(code, "docs/bedrock.md", "exec"), {"__name__": "__main__"})
    assert capsys.readouterr().out.splitlines() == [
        "Hello from Bedrock",
        "2 requests: the throttled one was retried",
    ]
