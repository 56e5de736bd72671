"""The fast request path: same errors as the SDK's own path, lean headers, bounded
concurrency per LLM."""

from __future__ import annotations

import asyncio
from typing import Any

import openai
import pytest

from app.llm.transport import ChatTransport, fast_transport
from app.testing import ScriptedLLMServer, drop, error, raw, text
from tests.conftest import TEST_API_KEY

BODY = b'{"model":"m","messages":[{"role":"user","content":"hi"}]}'

FAILURES = [
    pytest.param(error(401, "bad key"), id="401"),
    pytest.param(error(404, "no such model"), id="404"),
    pytest.param(error(429, "slow down", headers={"Retry-After": "7"}), id="429"),
    pytest.param(error(500, "oops"), id="500"),
    pytest.param(raw(502, b"<html>bad gateway</html>", content_type="text/html"), id="502-html"),
    pytest.param(drop(), id="drop"),
]


async def _outcome(attempt: Any) -> tuple[Any, ...]:
    try:
        await attempt()
    except openai.APIStatusError as e:
        return type(e), e.status_code, str(e), e.body, e.response.headers.get("retry-after")
    except openai.OpenAIError as e:
        return (type(e),)
    raise AssertionError("no error raised")


@pytest.mark.parametrize("reply", FAILURES)
async def test_failures_raise_what_the_sdk_raises(llm_server: ScriptedLLMServer, reply: Any):
    client = openai.AsyncOpenAI(api_key=TEST_API_KEY, base_url=llm_server.base_url,
                                max_retries=0)
    transport = fast_transport(client, "/chat/completions")
    assert isinstance(transport, ChatTransport)
    llm_server.push(reply, reply)
    ours = await _outcome(lambda: transport.post(BODY, 10.0))
    sdks = await _outcome(lambda: client.post("/chat/completions", content=BODY, cast_to=bytes,
                                              options={"security": {"bearer_auth": True}}))
    assert ours == sdks
    await client.close()


async def test_success_returns_the_body_with_lean_headers(llm_server: ScriptedLLMServer):
    client = openai.AsyncOpenAI(api_key=TEST_API_KEY, base_url=llm_server.base_url,
                                max_retries=0, default_headers={"X-Custom": "kept"})
    transport = fast_transport(client, "/chat/completions")
    assert transport is not None
    llm_server.push(text("hello"))
    body = await transport.post(BODY, 10.0)
    assert b'"hello"' in body
    headers = llm_server.requests[-1].headers
    assert headers["authorization"] == f"Bearer {TEST_API_KEY}"
    assert headers["content-type"] == "application/json"
    assert headers["x-custom"] == "kept"
    assert not [h for h in headers if h.startswith("x-stainless")]
    await client.close()


def test_clients_the_fast_path_does_not_handle():
    azure = openai.AsyncAzureOpenAI(api_key="k", api_version="2024-10-21",
                                    azure_endpoint="http://127.0.0.1:9")
    assert fast_transport(azure, "/chat/completions") is None
    with_query = openai.AsyncOpenAI(api_key="k", base_url="http://127.0.0.1:9/v1",
                                    default_query={"tenant": "x"})
    assert fast_transport(with_query, "/chat/completions") is None


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
    answers = await asyncio.gather(*(llm.ask([{"role": "user", "content": str(i)}],
                                             stream=False) for i in range(6)))
    assert answers == ["ok"] * 6
    assert state["max"] == 2
    await llm.aclose()
