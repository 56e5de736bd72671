"""The scripted OpenAI-compatible server, exercised with the real ``openai`` client over HTTP."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from app.testing import (
    CapturedRequest,
    Reply,
    ScriptedLLMServer,
    call,
    drop,
    error,
    raw,
    slow,
    text,
    tool_calls,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
USER = [{"role": "user", "content": "hello"}]


@pytest.fixture
def server() -> Iterator[ScriptedLLMServer]:
    srv = ScriptedLLMServer().start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
async def client(server: ScriptedLLMServer) -> AsyncIterator[openai.AsyncOpenAI]:
    api = openai.AsyncOpenAI(base_url=server.base_url, api_key="test", max_retries=0)
    try:
        yield api
    finally:
        await api.close()


async def ask(api: openai.AsyncOpenAI, **kwargs: Any) -> Any:
    kwargs.setdefault("model", "gpt-test")
    kwargs.setdefault("messages", USER)
    return await api.chat.completions.create(**kwargs)


async def collect_stream(api: openai.AsyncOpenAI, **kwargs: Any) -> list[Any]:
    stream = await ask(api, stream=True, **kwargs)
    return [chunk async for chunk in stream]


# --- raw HTTP helpers (for what the openai client cannot express) -------------------------------


async def read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return status, headers, body


def http_request(method: str, path: str, body: bytes = b"", extra: str = "") -> bytes:
    return (
        f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n{extra}\r\n"
    ).encode() + body


def chat_body(**extra: Any) -> bytes:
    return json.dumps({"model": "m", "messages": USER, **extra}).encode()


# --- plain replies -----------------------------------------------------------------------------


async def test_text_reply_looks_like_a_real_completion(server, client) -> None:
    server.push(text("Hello there, friend."))
    result = await ask(client)
    choice = result.choices[0]
    assert choice.message.content == "Hello there, friend."
    assert choice.message.role == "assistant"
    assert choice.message.tool_calls is None
    assert choice.finish_reason == "stop"
    assert result.object == "chat.completion"
    assert result.id.startswith("chatcmpl-")
    assert result.model == "gpt-test"  # echoes the request's model
    prompt = len(json.dumps(USER)) // 4
    completion = len("Hello there, friend.") // 4 + 1
    assert result.usage.prompt_tokens == prompt
    assert result.usage.completion_tokens == completion
    assert result.usage.total_tokens == prompt + completion


async def test_explicit_usage_and_no_usage(server, client) -> None:
    server.push(
        text("a", usage={"prompt_tokens": 11, "completion_tokens": 7}),
        text("b", usage=False),
        text("c", finish_reason="length"),
    )
    first = await ask(client)
    assert (first.usage.prompt_tokens, first.usage.completion_tokens) == (11, 7)
    assert first.usage.total_tokens == 18
    second = await ask(client)
    assert second.usage is None
    third = await ask(client)
    assert third.choices[0].finish_reason == "length"


async def test_tool_calls_dict_string_and_raw_object(server, client) -> None:
    double = json.dumps(json.dumps({"code": "print(1)"}))
    server.push(
        tool_calls(
            call("read_file", {"path": "a.txt", "lines": [1, 2]}),
            call("python_execute", '{"code": "print(1)"'),  # malformed, sent verbatim
            call("python_execute", double),
            call("browser_use", {"action": "go"}, raw_object=True),
            call("terminate", {"status": "success"}, id="call_custom"),
            content="Let me look.",
        ),
        tool_calls(call("terminate", {})),
    )
    result = await ask(client)
    choice = result.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Let me look."
    calls = choice.message.tool_calls
    assert [c.function.name for c in calls] == [
        "read_file",
        "python_execute",
        "python_execute",
        "browser_use",
        "terminate",
    ]
    assert all(c.type == "function" for c in calls)
    assert isinstance(calls[0].function.arguments, str)
    assert json.loads(calls[0].function.arguments) == {"path": "a.txt", "lines": [1, 2]}
    assert calls[1].function.arguments == '{"code": "print(1)"'
    assert calls[2].function.arguments == double
    assert calls[3].function.arguments == {"action": "go"}  # an object, not a string
    ids = [c.id for c in calls]
    assert ids[:4] == ["call_1", "call_2", "call_3", "call_4"]
    assert ids[4] == "call_custom"
    later = await ask(client)
    assert later.choices[0].message.tool_calls[0].id == "call_5"  # unique per server


# --- streaming --------------------------------------------------------------------------------


async def test_streaming_text_arrives_in_several_chunks_with_usage(server, client) -> None:
    content = "The quick brown fox jumps over the lazy dog."
    server.push(text(content, usage={"prompt_tokens": 5, "completion_tokens": 9}))
    chunks = await collect_stream(client, stream_options={"include_usage": True})
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert len({c.id for c in chunks}) == 1
    pieces = [
        c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content
    ]
    assert len(pieces) >= 2
    assert "".join(pieces) == content
    assert chunks[0].choices[0].delta.role == "assistant"
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "stop" and finishes.count("stop") == 1
    assert chunks[-1].choices == []
    assert chunks[-1].usage.total_tokens == 14
    assert all(c.usage is None for c in chunks[:-1])


async def test_streaming_short_text_still_splits(server, client) -> None:
    server.push(text("Hi"))
    chunks = await collect_stream(client)
    pieces = [c.choices[0].delta.content for c in chunks if c.choices[0].delta.content]
    assert pieces == ["H", "i"]


async def test_streaming_usage_only_when_asked_and_available(server, client) -> None:
    server.push(text("one two"), text("three four", usage=False))
    plain = await collect_stream(client)
    assert all(c.usage is None for c in plain)
    assert all(c.choices for c in plain)
    none_available = await collect_stream(client, stream_options={"include_usage": True})
    assert all(c.usage is None and c.choices for c in none_available)


async def test_streamed_tool_call_deltas_reassemble_to_the_same_calls(server, client) -> None:
    script = tool_calls(
        call("str_replace_editor", {"command": "view", "path": "/tmp/some/file.py"}),
        call("bash", '{"command": "ls -la"}'),
        content="Working on it",
    )
    server.push(script, script)
    whole = (await ask(client)).choices[0].message
    chunks = await collect_stream(client)
    content = "".join(c.choices[0].delta.content or "" for c in chunks)
    assembled: dict[int, dict[str, Any]] = {}
    argument_pieces: dict[int, int] = {}
    for chunk in chunks:
        for delta in chunk.choices[0].delta.tool_calls or []:
            entry = assembled.setdefault(delta.index, {"id": None, "name": None, "arguments": ""})
            if delta.id is not None:
                assert entry["id"] is None, "id must come once, in the first delta"
                entry["id"] = delta.id
                entry["name"] = delta.function.name
                assert delta.type == "function"
                assert delta.function.arguments == ""
            elif delta.function.arguments:
                argument_pieces[delta.index] = argument_pieces.get(delta.index, 0) + 1
                entry["arguments"] += delta.function.arguments
    assert content == whole.content == "Working on it"
    assert [assembled[i]["name"] for i in sorted(assembled)] == [
        c.function.name for c in whole.tool_calls
    ]
    assert [assembled[i]["arguments"] for i in sorted(assembled)] == [
        c.function.arguments for c in whole.tool_calls
    ]
    assert all(assembled[i]["id"] for i in assembled)
    assert len({assembled[i]["id"] for i in assembled}) == 2
    assert min(argument_pieces.values()) >= 2
    assert [c.choices[0].finish_reason for c in chunks][-1] == "tool_calls"


async def test_stream_helper_of_the_sdk_accepts_the_stream(server, client) -> None:
    server.push(tool_calls(call("terminate", {"status": "success"}), content="done"))
    async with client.chat.completions.stream(model="gpt-test", messages=USER) as stream:
        final = await stream.get_final_completion()
    message = final.choices[0].message
    assert message.content == "done"
    assert message.tool_calls[0].function.name == "terminate"
    assert json.loads(message.tool_calls[0].function.arguments) == {"status": "success"}


async def test_raw_object_arguments_stream_as_one_object(server, client) -> None:
    server.push(tool_calls(call("browser_use", {"action": "go", "url": "x"}, raw_object=True)))
    chunks = await collect_stream(client)
    argument_deltas = [
        d.function.arguments
        for c in chunks
        for d in (c.choices[0].delta.tool_calls or [])
        if d.function.arguments
    ]
    assert argument_deltas == [{"action": "go", "url": "x"}]


# --- failures ---------------------------------------------------------------------------------


async def test_rate_limit_carries_retry_after(server, client) -> None:
    server.push(error(429, headers={"Retry-After": "0.2"}))
    with pytest.raises(openai.RateLimitError) as caught:
        await ask(client)
    assert caught.value.status_code == 429
    assert caught.value.response.headers["retry-after"] == "0.2"
    assert caught.value.code == "rate_limit_exceeded"
    assert set(caught.value.body) >= {"message", "type", "param", "code"}


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (error(401), openai.AuthenticationError),
        (error(403), openai.PermissionDeniedError),
        (error(404), openai.NotFoundError),
        (error(500), openai.InternalServerError),
        (error(503, "busy"), openai.InternalServerError),
        (error(400, code="context_length_exceeded"), openai.BadRequestError),
    ],
)
async def test_error_statuses_map_to_sdk_errors(server, client, reply, expected) -> None:
    server.push(reply)
    with pytest.raises(expected) as caught:
        await ask(client)
    assert caught.value.status_code == reply.status
    assert caught.value.code == reply.code
    assert reply.message in str(caught.value)


async def test_errors_behave_the_same_when_streaming(server, client) -> None:
    server.push(
        error(429, headers={"Retry-After": "1"}), error(400, code="context_length_exceeded")
    )
    with pytest.raises(openai.RateLimitError):
        await collect_stream(client)
    with pytest.raises(openai.BadRequestError) as caught:
        await collect_stream(client)
    assert caught.value.code == "context_length_exceeded"


@pytest.mark.parametrize("stream", [False, True])
async def test_drop_is_a_connection_error_and_the_server_recovers(server, client, stream) -> None:
    server.push(drop(), text("still here"))
    with pytest.raises(openai.APIConnectionError) as caught:
        if stream:
            await collect_stream(client)
        else:
            await ask(client)
    assert not isinstance(caught.value, openai.APITimeoutError)
    result = await ask(client)
    assert result.choices[0].message.content == "still here"
    assert len(server.requests) == 2  # the dropped request was read and recorded


async def test_slow_reply_times_out_and_the_server_stays_healthy(server) -> None:
    server.push(slow(30, text("too late")), text("on time"))
    api = openai.AsyncOpenAI(base_url=server.base_url, api_key="test", max_retries=0, timeout=0.3)
    try:
        started = time.monotonic()
        with pytest.raises(openai.APITimeoutError):
            await ask(api)
        assert time.monotonic() - started < 10
        result = await ask(api)
        assert result.choices[0].message.content == "on time"
    finally:
        await api.close()
    assert server.errors == []


async def test_slow_reply_waits_before_answering(server, client) -> None:
    server.push(slow(0.2, text("eventually")))
    started = time.monotonic()
    result = await ask(client)
    assert time.monotonic() - started >= 0.2
    assert result.choices[0].message.content == "eventually"


async def test_one_slow_reply_does_not_hold_up_others(server, client) -> None:
    server.push(slow(5, text("slow")), text("fast"))
    slow_task = asyncio.create_task(ask(client))
    assert await server.wait_for_requests_async(1)
    fast = await asyncio.wait_for(ask(client), 3)
    assert fast.choices[0].message.content == "fast"
    assert not slow_task.done()
    slow_task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await slow_task


async def test_raw_reply_is_sent_verbatim(server) -> None:
    server.push(
        raw(200, b"{not json", headers={"X-Extra": "1"}),
        raw(418, "teapot", content_type="text/plain"),
    )
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        writer.write(http_request("POST", "/v1/chat/completions", chat_body()))
        writer.write(http_request("POST", "/v1/chat/completions", chat_body(stream=True)))
        status, headers, body = await read_response(reader)
        assert (status, body) == (200, b"{not json")
        assert headers["content-type"] == "application/json"
        assert headers["x-extra"] == "1"
        status, headers, body = await read_response(reader)
        assert (status, body, headers["content-type"]) == (418, b"teapot", "text/plain")
    finally:
        writer.close()
        await writer.wait_closed()


async def test_malformed_json_from_server_reaches_the_client(server, client) -> None:
    # openai 3.x lets the json.JSONDecodeError through (not an APIError): callers must map it.
    server.push(raw(200, "{oops"))
    with pytest.raises(ValueError):
        await ask(client)


# --- script bookkeeping -----------------------------------------------------------------------


async def test_requests_are_captured(server, client) -> None:
    tools = [
        {
            "type": "function",
            "function": {"name": "terminate", "parameters": {"type": "object", "properties": {}}},
        }
    ]
    server.push(text("one"), text("two"))
    await ask(client, tools=tools, tool_choice="auto", temperature=0.0)
    await ask(client, messages=[{"role": "system", "content": "s"}, *USER])
    first, second = server.requests
    assert isinstance(first, CapturedRequest)
    assert (first.method, first.path, first.route, first.index) == (
        "POST",
        "/v1/chat/completions",
        "chat",
        0,
    )
    assert first.headers["authorization"] == "Bearer test"
    assert first.headers["content-type"] == "application/json"
    assert first.body["model"] == "gpt-test"
    assert first.body["tool_choice"] == "auto"
    assert first.body["temperature"] == 0.0
    assert first.messages == USER
    assert first.tools == tools
    assert json.loads(first.raw) == first.body
    assert second.tools is None
    assert second.messages[0]["role"] == "system"
    assert second.index == 1
    assert server.remaining == 0


async def test_script_exhausted_is_a_clear_400(server, client) -> None:
    server.push(text("only one"))
    await ask(client)
    with pytest.raises(openai.BadRequestError) as caught:
        await ask(client)
    assert caught.value.status_code == 400
    assert "scripted server: script exhausted after 1 requests" in str(caught.value)


async def test_push_while_serving_and_remaining(server, client) -> None:
    assert server.remaining == 0
    pusher = threading.Thread(target=server.push, args=(text("x"), "plain string"))
    pusher.start()
    pusher.join()
    assert server.remaining == 2
    assert (await ask(client)).choices[0].message.content == "x"
    assert (await ask(client)).choices[0].message.content == "plain string"
    assert server.remaining == 0


async def test_responder_sync_and_async() -> None:
    seen: list[str] = []

    def responder(request: CapturedRequest) -> Reply:
        seen.append(request.messages[-1]["content"])
        return text(f"echo: {request.messages[-1]['content']}")

    async def async_responder(request: CapturedRequest) -> str:
        return f"async echo: {request.messages[-1]['content']}"

    with ScriptedLLMServer([text("scripted first")], responder=responder) as srv:
        api = openai.AsyncOpenAI(base_url=srv.base_url, api_key="test", max_retries=0)
        try:
            first = await ask(api)
            second = await ask(api, messages=[{"role": "user", "content": "ping"}])
        finally:
            await api.close()
    assert first.choices[0].message.content == "scripted first"
    assert second.choices[0].message.content == "echo: ping"
    assert seen == ["ping"]

    async with ScriptedLLMServer(responder=async_responder) as srv:
        api = openai.AsyncOpenAI(base_url=srv.base_url, api_key="test", max_retries=0)
        try:
            third = await ask(api, messages=[{"role": "user", "content": "pong"}])
        finally:
            await api.close()
    assert third.choices[0].message.content == "async echo: pong"


async def test_failing_responder_is_reported(server, client) -> None:
    def responder(request: CapturedRequest) -> Reply:
        raise RuntimeError("boom")

    server.responder = responder
    with pytest.raises(openai.InternalServerError) as caught:
        await ask(client)
    assert "boom" in str(caught.value)
    assert [type(e) for e in server.errors] == [RuntimeError]


async def test_two_hundred_concurrent_requests() -> None:
    def responder(request: CapturedRequest) -> Reply:
        # Every reply waits, so the requests are all in flight at the same time.
        return slow(0.2, text("echo " + request.messages[-1]["content"]))

    async with ScriptedLLMServer(responder=responder) as srv:
        api = openai.AsyncOpenAI(base_url=srv.base_url, api_key="test", max_retries=0)
        try:
            started = time.monotonic()
            results = await asyncio.gather(
                *(ask(api, messages=[{"role": "user", "content": str(i)}]) for i in range(200))
            )
            elapsed = time.monotonic() - started
        finally:
            await api.close()
        assert [r.choices[0].message.content for r in results] == [f"echo {i}" for i in range(200)]
        assert len(srv.requests) == 200
        assert srv.errors == []
    assert elapsed < 10  # 200 x 0.2 s = 40 s if the server handled them one at a time


async def test_azure_style_path(server) -> None:
    server.push(text("from azure"))
    api = openai.AsyncAzureOpenAI(
        api_key="azure-key",
        api_version="2024-06-01",
        azure_endpoint=server.root_url,
        max_retries=0,
    )
    try:
        result = await api.chat.completions.create(model="my-deployment", messages=USER)
    finally:
        await api.close()
    assert result.choices[0].message.content == "from azure"
    request = server.requests[0]
    assert request.path == "/openai/deployments/my-deployment/chat/completions"
    assert request.query == {"api-version": "2024-06-01"}
    assert request.headers["api-key"] == "azure-key"
    assert request.route == "chat"


async def test_models_and_unknown_routes(server, client) -> None:
    models = await client.models.list()
    assert [m.id for m in models.data] == ["scripted-model"]
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        writer.write(http_request("POST", "/v1/embeddings", b"{}"))
        status, _, body = await read_response(reader)
        assert status == 404
        assert "no route for POST /v1/embeddings" in json.loads(body)["error"]["message"]
        writer.write(http_request("GET", "/v1/chat/completions"))
        status, headers, _ = await read_response(reader)
        assert (status, headers["allow"]) == (405, "POST")
        writer.write(http_request("POST", "/v1/chat/completions", b"{broken"))
        status, _, body = await read_response(reader)
        assert status == 400 and "not valid JSON" in json.loads(body)["error"]["message"]
    finally:
        writer.close()
        await writer.wait_closed()
    assert [r.route for r in server.requests] == ["models", "unknown", "chat", "chat"]
    assert server.remaining == 0


async def test_wait_for_requests(server, client) -> None:
    assert server.wait_for_requests(1, timeout=0.05) is False
    assert await server.wait_for_requests_async(1, timeout=0.05) is False
    server.push(text("x"))
    waiter = asyncio.create_task(server.wait_for_requests_async(1))
    await ask(client)
    assert await waiter is True
    assert await asyncio.to_thread(server.wait_for_requests, 1, 0.05) is True


# --- HTTP robustness ---------------------------------------------------------------------------


async def test_keep_alive_pipelining_and_chunked_bodies(server) -> None:
    server.push(text("one"), text("two"), text("three"))
    body = chat_body()
    chunked = b"%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n" % (5, body[:5], len(body) - 5, body[5:])
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        writer.write(
            http_request("POST", "/v1/chat/completions", body)
            + http_request("POST", "/chat/completions", body)
        )
        writer.write(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n" + chunked
        )
        contents = []
        for _ in range(3):
            status, _, payload = await read_response(reader)
            assert status == 200
            contents.append(json.loads(payload)["choices"][0]["message"]["content"])
        assert contents == ["one", "two", "three"]
    finally:
        writer.close()
        await writer.wait_closed()
    assert server.requests[2].body == json.loads(body)


async def test_garbage_and_abandoned_connections_do_not_hurt(server, client) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(b"this is not http\r\n\r\n")
    status, headers, _ = await read_response(reader)
    assert status == 400 and headers["connection"] == "close"
    assert await reader.read() == b""  # the server closed the connection
    writer.close()
    await writer.wait_closed()

    _, half = await asyncio.open_connection("127.0.0.1", server.port)
    half.write(b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 100\r\n\r\n{")
    await half.drain()
    half.close()
    await half.wait_closed()

    server.push(text("fine"))
    assert (await ask(client)).choices[0].message.content == "fine"
    assert server.errors == []


def test_stop_is_idempotent_and_closes_connections() -> None:
    srv = ScriptedLLMServer([text("x")]).start()
    assert srv.start() is srv  # a second start is a no-op
    port = srv.port

    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(http_request("POST", "/v1/chat/completions", chat_body()))
        assert b"HTTP/1.1 200" in sock.recv(65536)
        srv.stop()
        srv.stop()
        assert sock.recv(65536) == b""  # the kept-alive connection was closed
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    with pytest.raises(RuntimeError):
        srv.start()
    thread_name = f"scripted-llm-server-{id(srv):x}"
    assert not [t for t in threading.enumerate() if t.name == thread_name]


def test_base_url_needs_a_started_server() -> None:
    srv = ScriptedLLMServer()
    with pytest.raises(RuntimeError, match="not started"):
        _ = srv.base_url
    srv.stop()  # stopping a server that never started is harmless
