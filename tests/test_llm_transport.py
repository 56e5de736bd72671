"""Transports under the LLM: plain HTTP (httpx) by default, the openai SDK on request; the same
errors either way; stalls, cut streams and cancelled requests; retries counted honestly;
what an endpoint refused remembered across instances (and processes)."""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
import subprocess
import sys
import time
from typing import Any

import pytest

from app.config import LLMSettings
from app.exceptions import (
    ContextWindowExceededError,
    LLMAuthenticationError,
    LLMConnectionError,
    LLMEndpointError,
    LLMError,
    LLMNotFoundError,
    LLMResponseError,
    LLMServerError,
    LLMTimeoutError,
)
from app.llm import LLM
from app.llm.openai.errors import EXCERPT_CHARS, body_excerpt, endpoint_error
from app.llm.openai.http_transport import HttpTransport
from app.schema import Message
from app.testing import ScriptedLLMServer, call, cut, drop, error, raw, stall, text, tool_calls
from tests.conftest import TEST_API_KEY, llm_settings

USER = [Message.user_message("hi")]
#: A request as big as the overflows below say (a smaller one would contradict their numbers).
LONG = [Message.user_message("hello " * 1800)]
#: What a web server (not an LLM API) answers: a whole page.
PAGE = (
    "<!DOCTYPE html>\n<html><head><title>Welcome to\n nginx!</title>"
    "<script>var secret = 'in-a-script';</script></head><body>"
    + "<p>deep-in-the-page</p>" * 400
    + "</body></html>"
)
TOOLS = [{"type": "function", "function": {"name": "echo", "parameters": {"type": "object"}}}]

FAILURES = [
    pytest.param(error(401, "bad key"), id="401"),
    pytest.param(error(404, "no such model"), id="404"),
    pytest.param(error(429, "slow down", headers={"Retry-After": "7"}), id="429"),
    pytest.param(
        error(429, "You exceeded your current quota", code="insufficient_quota"), id="quota"
    ),
    pytest.param(
        error(
            400,
            "Requested tokens (2100) exceed context window of 2048",
            code="context_length_exceeded",
        ),
        id="context",
    ),
    pytest.param(error(400, "gemma does not support tools"), id="tools"),
    pytest.param(error(500, "oops"), id="500"),
    pytest.param(raw(502, b"<html>bad gateway</html>", content_type="text/html"), id="502-html"),
    pytest.param(raw(404, PAGE, content_type="text/html"), id="404-html"),
    pytest.param(raw(200, PAGE, content_type="text/html"), id="200-html"),
    pytest.param(drop(), id="drop"),
]


def _outcome(e: LLMError) -> tuple[Any, ...]:
    return (
        type(e),
        e.status_code,
        getattr(e, "retry_after", None),
        getattr(e, "limit", None),
        getattr(e, "tokens", None),
    )


@pytest.mark.parametrize("reply", FAILURES)
async def test_both_transports_raise_the_same_errors(llm_server, make_llm, reply):
    llm_server.push(reply, reply)
    outcomes = []
    for transport in ("httpx", "openai"):
        llm = make_llm(transport=transport, max_retries=0, tool_calling="native")
        with pytest.raises(LLMError) as info:
            await llm.request(USER, tools=TOOLS, stream=False)
        outcomes.append(_outcome(info.value))
        assert "gpt-4o-mini" in str(info.value)
        await llm.aclose()
    assert outcomes[0] == outcomes[1]


async def test_default_transport_is_httpx_with_lean_headers(llm_server, make_llm):
    llm = make_llm()
    assert isinstance(llm.transport, HttpTransport)
    llm_server.push(text("hello"))
    assert await llm.ask(USER) == "hello"
    headers = llm_server.requests[-1].headers
    assert headers["authorization"] == f"Bearer {TEST_API_KEY}"
    assert headers["content-type"] == "application/json"
    assert not [h for h in headers if h.startswith("x-stainless")]
    await llm.aclose()


@pytest.mark.e2e
def test_a_request_over_http_imports_neither_openai_nor_httpx():
    """The default transport needs only httpcore2, under the httpx2 that openai 3 and mcp 2
    install (a core install has no httpx: importing it would fail there); without a proxy
    it does not even import httpx2's client."""
    code = """
import asyncio, sys
from app.llm import LLM
from app.config import LLMSettings
from app.testing import ScriptedLLMServer, text, tool_calls, call
async def main():
    with ScriptedLLMServer([text("a"), tool_calls(call("x", {}))]) as server:
        llm = LLM.create(llm_config=LLMSettings(model="m", base_url=server.base_url))
        assert await llm.ask([{"role": "user", "content": "hi"}]) == "a"
        reply = await llm.request([{"role": "user", "content": "hi"}],
            tools=[{"type": "function", "function": {"name": "x"}}], stream=False)
        assert reply.message.tool_calls[0].function.name == "x"
        await llm.aclose()
asyncio.run(main())
assert "openai" not in sys.modules, "openai imported"
assert "httpx" not in sys.modules, "httpx imported"
assert "httpx2" not in sys.modules, "httpx2 imported"
assert "httpcore2" in sys.modules
"""
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


async def test_requests_in_flight_are_bounded(llm_server: ScriptedLLMServer, make_llm):
    """With max_concurrent_requests=2, the server never sees more than two requests at once,
    and does see two (each of the first two waits until both have arrived)."""
    state = {"inflight": 0, "max": 0}
    both_arrived = asyncio.Event()  # lives on the server's loop, created lazily there

    async def responder(request: Any) -> Any:
        state["inflight"] += 1
        state["max"] = max(state["max"], state["inflight"])
        if state["inflight"] >= 2:
            both_arrived.set()
        try:
            await asyncio.wait_for(both_arrived.wait(), 5.0)
        finally:
            state["inflight"] -= 1
        return text("ok")

    llm_server.responder = responder
    llm = make_llm(max_concurrent_requests=2)
    answers = await asyncio.gather(
        *(llm.ask([{"role": "user", "content": str(i)}], stream=False) for i in range(6))
    )
    assert answers == ["ok"] * 6
    assert state["max"] == 2
    await llm.aclose()


# --- stalls, cut streams, abandoned requests ------------------------------------------------


@pytest.mark.parametrize("transport", ["httpx", "openai"])
async def test_a_stalled_stream_is_a_timeout_that_says_what_stalled(
    llm_server, make_llm, transport
):
    llm_server.push(stall(text("one two three four five"), after=3, seconds=30))
    llm = make_llm(timeout=0.5, max_retries=0, transport=transport)
    seen: list[str] = []
    with pytest.raises(LLMTimeoutError) as info:
        await llm.request(USER, on_delta=seen.append)
    message = str(info.value)
    assert "stalled" in message and "gpt-4o-mini" in message
    assert llm_server.base_url in message and " s " in message
    assert "".join(seen) == "one two "  # what came before the stall was shown
    # The abandoned answer's connection was closed: the server can stop generating.
    assert await asyncio.to_thread(llm_server.wait_for_disconnects, 1, 5.0)
    await llm.aclose()


async def test_a_stall_is_retried_and_the_text_is_not_shown_twice(llm_server, make_llm):
    llm_server.push(
        stall(text("alpha beta gamma delta"), after=3, seconds=30), text("alpha beta gamma delta")
    )
    llm = make_llm(timeout=0.5)
    seen: list[str] = []
    response = await llm.request(USER, on_delta=seen.append)
    assert response.message.content == "alpha beta gamma delta"
    assert "".join(seen) == "alpha beta gamma delta"
    assert len(llm_server.requests) == 2


async def test_a_cancelled_request_closes_its_connection(llm_server, make_llm):
    llm_server.push(stall(text("never finished here"), after=2, seconds=30))
    llm = make_llm()
    task = asyncio.ensure_future(llm.request(USER))
    assert await llm_server.wait_for_requests_async(1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await asyncio.to_thread(llm_server.wait_for_disconnects, 1, 5.0)
    assert llm_server.disconnects == [0]


async def test_a_timed_out_plain_request_closes_its_connection(llm_server, make_llm):
    llm_server.push(stall(text("slow"), after=0, seconds=30))
    with pytest.raises(LLMTimeoutError, match=r"timed out.*timeout 0.3 s"):
        await make_llm(timeout=0.3, max_retries=0).request(USER, stream=False)
    assert await asyncio.to_thread(llm_server.wait_for_disconnects, 1, 5.0)


CUT_STREAM = b'data: {"choices":[{"index":0,"delta":{"content":"half an ans"}}]}\n\n'


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(raw(200, CUT_STREAM, content_type="text/event-stream"), id="no-done"),
        pytest.param(cut(text("half an answer and the rest"), after=3), id="connection-cut"),
    ],
)
async def test_a_stream_cut_short_is_an_error_not_an_answer(llm_server, make_llm, reply):
    llm_server.push(reply)
    with pytest.raises(LLMConnectionError) as info:
        await make_llm(max_retries=0).request(USER)
    assert "gpt-4o-mini" in str(info.value)
    if "no-done" in str(reply)[:0] or isinstance(reply, type(raw(200, b""))):
        assert "ended before the answer was complete" in str(info.value)
    # Retried like any broken connection:
    llm_server.push(reply, text("whole"))
    assert (await make_llm().request(USER)).message.content == "whole"


async def test_a_plain_body_cut_short_is_retried(llm_server, make_llm):
    llm_server.push(cut(text("x" * 200), after=0), text("ok"))
    assert (await make_llm().request(USER, stream=False)).message.content == "ok"
    assert len(llm_server.requests) == 2


# --- retries: the log counts right ------------------------------------------------------------


@pytest.mark.parametrize("max_retries", [0, 1, 3])
async def test_retry_log_counts_only_retries_that_happen(
    llm_server, make_llm, warnings, max_retries
):
    llm_server.push(*[error(500)] * (max_retries + 2))
    with (
        pytest.raises(LLMServerError, match="gave up")
        if max_retries
        else pytest.raises(LLMServerError)
    ):
        await make_llm(max_retries=max_retries).request(USER)
    retries = [w for w in warnings if "retry" in w]
    assert [w.split("retry ")[1].split(" ")[0] for w in retries] == [
        f"{k}/{max_retries}" for k in range(1, max_retries + 1)
    ]
    assert len(llm_server.requests) == max_retries + 1


# --- context window ----------------------------------------------------------------------------


async def test_context_overflow_carries_and_teaches_the_window(llm_server, make_llm):
    llm_server.push(
        error(
            400,
            "Requested tokens (2100) exceed context window of 2048",
            code="context_length_exceeded",
        )
    )
    llm = make_llm(model="local-smollm")
    assert llm.context_window is None  # not configured, not known by name
    with pytest.raises(ContextWindowExceededError) as info:
        await llm.request(LONG, tools=TOOLS)
    assert (info.value.limit, info.value.tokens) == (2048, 2100)
    assert llm.context_window == 2048
    assert len(llm_server.requests) == 1  # never retried
    assert make_llm().context_window == 128_000  # known by name
    assert make_llm(max_input_tokens=1000).context_window == 1000


async def test_llama_cpp_overflow_body_fields(llm_server, make_llm):
    body = {
        "error": {
            "code": 400,
            "type": "exceed_context_size_error",
            "n_ctx": 4096,
            "n_prompt_tokens": 5000,
            "message": "the request exceeds the available context size",
        }
    }
    llm_server.push(raw(400, json.dumps(body)))
    with pytest.raises(ContextWindowExceededError) as info:
        await make_llm(model="local").request(LONG)
    assert (info.value.limit, info.value.tokens) == (4096, 5000)


# --- what the endpoint refused is remembered ---------------------------------------------------


def _refuses_streaming_with_tools(server: ScriptedLLMServer) -> None:
    """llama.cpp's answer to a streamed request with tools: HTTP 200, an empty event stream."""

    def respond(request: Any) -> Any:
        if request.stream and request.tools:
            return raw(200, b"", content_type="text/event-stream")
        return tool_calls(call("echo", {"text": "x"})) if request.tools else text("plain")

    server.responder = respond


async def test_refused_streaming_with_tools_is_remembered_across_instances(llm_server, make_llm):
    _refuses_streaming_with_tools(llm_server)
    first = make_llm(stream=True)  # every turn streams unless refused
    reply = await first.request(USER, tools=TOOLS)
    assert reply.message.tool_calls[0].function.name == "echo"
    assert [r.stream for r in llm_server.requests] == [True, False]
    assert "stream_tools" in first.refused_features and "stream" not in first.refused_features
    # Without tools this endpoint still streams.
    assert (await first.request(USER)).message.content == "plain"
    assert llm_server.requests[-1].stream is True
    # A new instance (as in a new process) does not ask again.
    second = make_llm(stream=True)
    await second.request(USER, tools=TOOLS)
    assert llm_server.requests[-1].stream is False
    assert len(llm_server.requests) == 4


@pytest.mark.e2e
def test_the_memory_survives_a_new_process(llm_server, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENMANUS_CACHE_DIR", str(tmp_path))
    _refuses_streaming_with_tools(llm_server)
    code = f"""
import asyncio
from app.llm import LLM
from app.config import LLMSettings
async def main():
    llm = LLM.create(llm_config=LLMSettings(model="m", base_url={llm_server.base_url!r}))
    await llm.request([{{"role": "user", "content": "hi"}}],
                      tools=[{{"type": "function", "function": {{"name": "echo"}}}}])
asyncio.run(main())
"""
    for _ in range(2):
        subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    assert [r.stream for r in llm_server.requests] == [True, False, False]


async def test_capability_cache_off_keeps_it_in_the_instance(llm_server, make_llm):
    _refuses_streaming_with_tools(llm_server)
    await make_llm(capability_cache=False).request(USER, tools=TOOLS)
    await make_llm(capability_cache=False).request(USER, tools=TOOLS)
    assert [r.stream for r in llm_server.requests] == [True, False, True, False]


async def test_stream_false_in_the_profile_never_streams(llm_server, make_llm):
    llm_server.push(text("a"), text("b"))
    llm = make_llm(stream=False)
    seen: list[str] = []
    await llm.request(USER, on_delta=seen.append)
    await llm.ask(USER)
    assert [r.stream for r in llm_server.requests] == [False, False]
    assert seen == ["a"]


# --- nothing on stdout -----------------------------------------------------------------------


async def test_token_counting_never_prints(llm_server, make_llm, capfd):
    """Usage not reported -> counted locally (tiktoken cannot download here): stdout stays
    clean, the streamed answer is not interleaved with warnings."""
    from app.tokens import clear_encoding_cache

    clear_encoding_cache()
    llm_server.push(text("streamed answer", usage=False))
    response = await make_llm(model="gpt-4o").request(USER, on_delta=lambda _: None)
    assert response.usage.estimated
    assert capfd.readouterr().out == ""
    clear_encoding_cache()


def test_settings_reject_azure_over_httpx(llm_server):
    with pytest.raises(ValueError, match="transport"):
        llm_settings(llm_server, api_type="azure", api_version="2024-10-21", transport="httpx")
    LLM.create(llm_config=llm_settings(llm_server, tool_calling="TEXT"))  # case-insensitive


async def test_an_empty_stream_that_was_an_overflow_is_not_taken_for_a_refusal(
    llm_server, make_llm
):
    """llama.cpp answers an overflowing streamed request with an empty event stream too: the
    refusal counts only once the same turn succeeds unstreamed, never after an overflow."""
    overflow = error(
        400, "Requested tokens (2300) exceed context window of 2048", code="context_length_exceeded"
    )

    def respond(request: Any) -> Any:
        if request.stream:
            return raw(200, b"", content_type="text/event-stream")
        return overflow

    llm_server.responder = respond
    llm = make_llm(model="local", stream=True)
    with pytest.raises(ContextWindowExceededError):
        await llm.request(LONG, tools=TOOLS)
    assert llm.refused_features == frozenset()
    assert make_llm(model="local").refused_features == frozenset()  # nothing was remembered
    # The next (smaller) turn is streamed again.
    llm_server.responder = None
    llm_server.push(tool_calls(call("echo", {"text": "x"})))
    await llm.request(USER, tools=TOOLS)
    assert llm_server.requests[-1].stream is True


WRITTEN_CALLS = [
    '<tool_call>{"name": "echo", "arguments": {"text": "hi"}}</tool_call>',
    # The reply that once ran a tool and turned native tools off for a week (issue 25).
    'To call it you would send: {"name": "echo", "arguments": {"text": "Paris"}}',
]


@pytest.mark.parametrize("mode", ["auto", "native"])
@pytest.mark.parametrize("written", WRITTEN_CALLS)
async def test_a_call_written_as_text_in_a_native_turn_is_prose(
    llm_server, make_llm, mode, written, tmp_path, monkeypatch, warnings
):
    """The model's prose is not the endpoint's word: a native turn whose text quotes a call
    runs nothing, remembers nothing (in this process or the capability file), and the next
    turn still sends the tools; the user is told once how to switch to text mode."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("OPENMANUS_CACHE_DIR", str(cache))
    llm_server.push(text(written), text(written), text("done"))
    llm = make_llm(model="local", tool_calling=mode)
    reply = await llm.request(USER, tools=TOOLS)
    assert not reply.message.tool_calls and reply.message.content == written
    assert reply.finish_reason != "tool_calls"
    await llm.request(USER, tools=TOOLS)
    await llm.request(USER, tools=TOOLS)
    assert llm.refused_features == frozenset()
    assert all(r.body["tools"] == TOOLS for r in llm_server.requests)
    assert not (cache / "endpoints.json").exists()
    assert make_llm(model="local").refused_features == frozenset()
    said = [m for m in warnings if "looks like a tool call" in m]
    assert len(said) == 1 and 'tool_calling = "text"' in said[0]


async def test_json_in_an_ordinary_answer_is_not_a_tool_call(llm_server, make_llm):
    llm_server.push(text('The config is {"name": "demo", "arguments": []}.'))
    reply = await make_llm(model="local").request(USER, tools=TOOLS)
    assert not reply.message.tool_calls and "demo" in reply.message.content


def _completion_body(content: str) -> bytes:
    return json.dumps(
        {
            "id": "c1",
            "object": "chat.completion",
            "model": "gpt-4o-mini",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": content},
                }
            ],
        }
    ).encode()


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
async def test_compressed_replies_are_decoded(llm_server, make_llm, encoding):
    """Replies are asked for uncompressed; a server that compresses anyway is understood."""
    import gzip
    import zlib

    body = _completion_body("squeezed é")
    packed = gzip.compress(body) if encoding == "gzip" else zlib.compress(body)
    llm_server.push(raw(200, packed, headers={"Content-Encoding": encoding}))
    llm = make_llm(max_retries=0)
    assert await llm.ask(USER, stream=False) == "squeezed é"
    headers = llm_server.requests[-1].headers
    assert headers["accept-encoding"] == "identity"
    assert headers["host"] == llm_server.base_url.split("/")[2]  # host:port, as sent
    await llm.aclose()


async def test_a_compressed_event_stream_is_decoded(llm_server, make_llm):
    import gzip

    events = b"".join(
        b"data: " + json.dumps(chunk).encode() + b"\n\n"
        for chunk in (
            {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "zip"}}]},
            {"choices": [{"index": 0, "delta": {"content": "ped"}, "finish_reason": "stop"}]},
        )
    )
    reply = raw(
        200,
        gzip.compress(events + b"data: [DONE]\n\n"),
        content_type="text/event-stream",
        headers={"Content-Encoding": "gzip"},
    )
    llm_server.push(reply)
    llm = make_llm(max_retries=0)
    pieces: list[str] = []
    response = await llm.request(USER, on_delta=pieces.append, stream=True)
    assert response.message.content == "zipped" and "".join(pieces) == "zipped"
    await llm.aclose()


async def test_a_reply_in_an_encoding_not_asked_for_is_an_error(llm_server, make_llm):
    llm_server.push(raw(200, b"\x00\x01garbage", headers={"Content-Encoding": "br"}))
    llm = make_llm(max_retries=0)
    with pytest.raises(LLMResponseError, match="encoding not asked for: 'br'"):
        await llm.ask(USER, stream=False)
    await llm.aclose()


async def test_a_configured_proxy_carries_the_requests(llm_server, make_llm, monkeypatch):
    """With HTTP_PROXY set (and 127.0.0.1 not exempted), requests go through the proxy, as
    httpx2's client routes them."""
    from app.testing.proxy import RecordingProxy

    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    with RecordingProxy(llm_server.base_url) as proxy:
        proxy_url = proxy.base_url.split("/v1")[0]
        monkeypatch.setenv("HTTP_PROXY", proxy_url)
        monkeypatch.setenv("http_proxy", proxy_url)
        llm_server.push(text("via the proxy"))
        llm = make_llm(max_retries=0)
        assert await llm.ask(USER, stream=False) == "via the proxy"
        await llm.aclose()
        sent = proxy.chat_requests()
    assert len(sent) == 1 and sent[0].path == f"{llm_server.base_url}/chat/completions"


# --- errors retrying cannot fix ---------------------------------------------------------------


@pytest.mark.parametrize("transport", ["httpx", "openai"])
async def test_a_closed_port_fails_at_once_naming_the_endpoint(transport):
    with ScriptedLLMServer() as server:  # started and stopped: its port is now closed
        settings = llm_settings(
            server, transport=transport, retry_min_wait=1.0, retry_max_wait=60.0, max_retries=5
        )
    llm = LLM.create(llm_config=settings)
    if transport == "openai":
        import openai  # noqa: F401 - imported before the clock starts (about a second)
    started = time.monotonic()
    with pytest.raises(LLMEndpointError) as info:
        await llm.request(USER, stream=False)
    await llm.aclose()
    assert time.monotonic() - started < 1.0  # one retry alone would wait at least 1 s
    assert str(info.value).startswith(f"Nothing listens at {server.base_url} (connection refused)")
    assert "is the server running, and is base_url right?" in str(info.value)
    assert info.value.attempts == 1


@pytest.mark.parametrize("transport", ["httpx", "openai"])
async def test_tls_to_a_plain_http_server_fails_at_once(transport):
    """https:// for a local plain-HTTP server: its "400 Bad Request" to the TLS hello ends
    the handshake; the same URL would fail the same way on every retry."""
    seen: list[bytes] = []

    async def plain_http(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await reader.read(1024))
        writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(plain_http, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    https = f"https://127.0.0.1:{port}/v1"
    settings = LLMSettings(
        model="m", base_url=https, api_key=TEST_API_KEY, transport=transport, timeout=10.0
    )
    llm = LLM.create(llm_config=settings)
    if transport == "openai":
        import openai  # noqa: F401 - imported before the clock starts (about a second)
    started = time.monotonic()
    try:
        with pytest.raises(LLMEndpointError) as info:
            await llm.request(USER, stream=False)
    finally:
        await llm.aclose()
        server.close()
        await server.wait_closed()
    assert time.monotonic() - started < 1.0  # default retries would wait 1 s and more
    assert str(info.value).startswith(f"TLS with {https.rstrip('/')}")
    assert "http://, not https://" in str(info.value)
    assert len(seen) == 1 and seen[0].startswith(b"\x16\x03")  # one TLS hello, not retried


def _raised(make: Any) -> BaseException:
    try:
        make()
    except BaseException as e:
        return e
    raise AssertionError("nothing raised")


def _connect_error_from(cause: BaseException) -> BaseException:
    """httpcore2's ConnectError raised from ``cause``, the chain the pool produces."""
    import httpcore2

    def make() -> None:
        try:
            raise cause
        except BaseException as e:
            raise httpcore2.ConnectError(str(e)) from e

    return _raised(make)


def test_a_failed_dns_lookup_is_final_and_says_so():
    error = _connect_error_from(socket.gaierror(socket.EAI_NONAME, "Name or service not known"))
    final = endpoint_error(error, endpoint="http://llm.example.invalid/v1", model="m")
    assert isinstance(final, LLMEndpointError)
    assert str(final) == (
        "The host of http://llm.example.invalid/v1 was not found (DNS lookup failed: Name or "
        "service not known) for model 'm': is base_url spelt right, and is the network up?"
    )


def test_a_certificate_that_does_not_verify_is_final_and_says_so():
    cause = ssl.SSLCertVerificationError(1, "certificate verify failed")
    cause.verify_message = "Hostname mismatch, certificate is not valid for 'llm.lan'."
    final = endpoint_error(_connect_error_from(cause), endpoint="https://llm.lan/v1", model="m")
    assert isinstance(final, LLMEndpointError)
    assert str(final).startswith(
        "TLS with https://llm.lan/v1 failed (certificate: Hostname mismatch, certificate is "
        "not valid for 'llm.lan'.) for model 'm'"
    )
    assert "SSL_CERT_FILE" in str(final)


def test_a_refusal_inside_anyios_group_of_attempts_is_found():
    """Several addresses (IPv6 and IPv4) all refused: anyio groups the errors."""
    group = ExceptionGroup("multiple connection attempts failed", [ConnectionRefusedError()] * 2)
    error = _connect_error_from(_raised(lambda: _raise_from(OSError("All failed"), group)))
    final = endpoint_error(error, endpoint="http://127.0.0.1:9/v1", model="m")
    assert final is not None and "(connection refused)" in str(final)


def _raise_from(error: BaseException, cause: BaseException) -> None:
    raise error from cause


@pytest.mark.parametrize(
    "cause",
    [
        pytest.param(ConnectionResetError(104, "Connection reset by peer"), id="reset"),
        pytest.param(ssl.SSLError(1, "bad record mac"), id="tls-mid-answer"),
        pytest.param(ConnectionRefusedError(111, "refused"), id="refused-mid-answer"),
    ],
)
def test_failures_after_connecting_stay_transient(cause):
    """The same exception types met while reading an answer are a broken connection."""
    import httpcore2

    error = _raised(lambda: _raise_from(httpcore2.ReadError(str(cause)), cause))
    assert endpoint_error(error, endpoint="http://x/v1", model="m") is None


def test_a_reset_while_connecting_stays_transient():
    error = _connect_error_from(ConnectionResetError(104, "Connection reset by peer"))
    assert endpoint_error(error, endpoint="http://x/v1", model="m") is None


@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        pytest.param(error(401, "bad key"), LLMAuthenticationError, id="401"),
        pytest.param(error(403, "forbidden"), LLMAuthenticationError, id="403"),
        pytest.param(error(404, "no such model"), LLMNotFoundError, id="404"),
        pytest.param(raw(404, PAGE, content_type="text/html"), LLMNotFoundError, id="404-html"),
        pytest.param(raw(200, PAGE, content_type="text/html"), LLMEndpointError, id="200-html"),
    ],
)
async def test_final_answers_are_not_retried(llm_server, make_llm, reply, kind):
    llm_server.push(reply, text("never asked"))
    with pytest.raises(kind) as info:
        await make_llm(max_retries=5).request(USER, stream=False)
    assert len(llm_server.requests) == 1
    assert info.value.attempts == 1


@pytest.mark.parametrize("transport", ["httpx", "openai"])
async def test_a_web_page_to_a_streamed_request_is_not_asked_again(llm_server, transport):
    """Not a refusal to stream (asked again without): the same page, the same error."""
    llm_server.push(raw(200, PAGE, content_type="text/html"), text("never asked"))
    llm = LLM.create(llm_config=llm_settings(llm_server, transport=transport))
    with pytest.raises(LLMEndpointError, match="an HTML page titled 'Welcome to nginx!'"):
        await llm.request(USER, stream=True)
    await llm.aclose()
    assert len(llm_server.requests) == 1


@pytest.mark.parametrize("status", [404, 200, 502])
async def test_a_web_page_shows_as_its_title(llm_server, make_llm, status):
    llm_server.push(raw(status, PAGE, content_type="text/html"))
    with pytest.raises(LLMError) as info:
        await make_llm(max_retries=0).request(USER, stream=False)
    message = str(info.value)
    assert "an HTML page titled 'Welcome to nginx!'" in message
    assert "deep-in-the-page" not in message and "in-a-script" not in message
    assert len(message) < 400, message


def test_excerpts_of_bodies_that_are_not_json():
    assert body_excerpt(PAGE) == "an HTML page titled 'Welcome to nginx!'"
    untitled = "<html><style>p {}</style><body><h1>Bad &amp; wrong</h1>" + "<p>word</p>" * 200
    excerpt = body_excerpt(untitled)
    assert excerpt.startswith("an HTML page: 'Bad & wrong word word")
    assert "<" not in excerpt and "p {}" not in excerpt
    assert len(excerpt) <= len("an HTML page: ''") + EXCERPT_CHARS
    assert body_excerpt(b"  plain\n\n  text  ") == "plain text"
    assert body_excerpt("x" * 1000) == "x" * (EXCERPT_CHARS - 3) + "..."
    assert body_excerpt("<html></html>") == "an empty HTML page"


# --- issue 29: llama-cpp-python's refusal recognised at once; timeouts that do not queue ------

#: What llama-cpp-python (0.3.x, ``chatml-function-calling``) sent for a streamed request with
#: tools once it had evaluated the prompt and chosen a call: keep-alive pings, then the end.
REFUSED_STREAM = raw(
    200,
    b": ping - 2026-11-26 07:37:37.278524+00:00\n\n: ping - 2026-11-26 07:37:52.292823+00:00\n\n",
    content_type="text/event-stream; charset=utf-8",
)
#: Its plain answer when the tool arguments it generated ran into the window (max_tokens is
#: ignored there): the "prompt" it names is the one it grew itself.
RUNAWAY = raw(
    400,
    b'{"error":{"message":"This model\'s maximum context length is 4096 tokens. However, you '
    b"requested 4608 tokens (4096 in the messages, 512 in the completion). Please reduce the "
    b'length of the messages or completion.","type":"invalid_request_error","param":"messages",'
    b'"code":"context_length_exceeded"}}',
)


def _chatml_function_calling(server: ScriptedLLMServer, *plain: Any) -> None:
    """Streams with tools are refused as llama-cpp-python refuses them; plain requests get
    ``plain`` in turn, then a call."""
    answers = list(plain)

    def respond(request: Any) -> Any:
        if request.stream and request.tools:
            return REFUSED_STREAM
        if answers:
            return answers.pop(0)
        return tool_calls(call("echo", {"text": "x"})) if request.tools else text("plain")

    server.responder = respond


async def test_a_refused_tool_stream_is_recognised_even_when_the_plain_turn_runs_away(
    llm_server, make_llm
):
    """First contact: the streamed turn is refused, its plain retry comes back with the
    runaway overflow, which the LLM asks again as a server fault. That repeat goes plain (no
    second streamed probe, which would cost the server another prompt evaluation), and the
    refusal is remembered: the next turn is plain too."""
    _chatml_function_calling(llm_server, RUNAWAY)
    llm = make_llm(model="local", max_tokens=512, max_retries=0)
    reply = await llm.request(USER, tools=TOOLS)
    assert reply.message.tool_calls[0].function.name == "echo"
    assert [r.stream for r in llm_server.requests] == [True, False, False]
    assert "stream_tools" in llm.refused_features
    await llm.request(USER, tools=TOOLS, on_delta=lambda _: None)
    assert [r.stream for r in llm_server.requests] == [True, False, False, False]


async def test_a_refused_tool_stream_is_recognised_when_the_plain_turn_times_out(
    llm_server, make_llm
):
    """The plain retry was taken and outlived its timeout: no overflow, so the empty stream
    was the refusal, remembered although the turn failed; the next turn is not streamed."""
    _chatml_function_calling(llm_server, stall(text("slow"), after=0, seconds=30))
    llm = make_llm(model="local", timeout=0.5, max_retries=0)
    with pytest.raises(LLMTimeoutError):
        await llm.request(USER, tools=TOOLS)
    assert "stream_tools" in llm.refused_features
    await llm.request(USER, tools=TOOLS, on_delta=lambda _: None)
    assert [r.stream for r in llm_server.requests] == [True, False, False]


@pytest.mark.parametrize("transport", ["httpx", "openai"])
async def test_a_plain_request_that_times_out_is_retried_once_not_queued(
    llm_server, make_llm, transport
):
    """An endpoint that gets plain requests only (here ``stream = false``; also one that
    refused streaming tools): each timed-out attempt is hung up, and it is asked again once,
    not max_retries times, since every retry would wait behind the answers left behind."""
    llm_server.push(*[stall(text("slow"), after=0, seconds=30)] * 6)
    llm = make_llm(stream=False, timeout=0.3, max_retries=5, transport=transport)
    with pytest.raises(LLMTimeoutError, match="gave up after 2 attempts"):
        await llm.request(USER)
    assert len(llm_server.requests) == 2
    assert await asyncio.to_thread(llm_server.wait_for_disconnects, 2, 5.0)
    await llm.aclose()


async def test_a_timed_out_plain_request_that_can_stream_is_retried_streamed(llm_server, make_llm):
    """With ``stream = "auto"`` the retry of a timed-out plain request is streamed (its
    ``timeout`` then bounds the silence between chunks, and a stream can be stopped)."""
    llm_server.push(text("warm-up"), stall(text("slow"), after=0, seconds=30), text("streamed"))
    llm = make_llm(timeout=0.5, max_retries=2)
    await llm.request(USER, stream=True)  # a fast first turn: the next one goes plain
    reply = await llm.request(USER)
    assert reply.message.content == "streamed"
    assert [r.stream for r in llm_server.requests] == [True, False, True]
