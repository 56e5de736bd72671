"""The model layer against a real server (llama-cpp-python, SmolLM2-135M / Gemma 3 270M).

Every assertion is about what the framework sent, read or raised; none needs the model to be
clever. Where an outcome would depend on the model, the server's own sampling controls make it
deterministic (``logit_bias`` banning the end-of-text tokens, a small ``max_tokens``).
"""

from __future__ import annotations

import re
import time

import pytest

from app.exceptions import ContextWindowExceededError, LLMTimeoutError
from app.llm import LLM
from app.llm.model import ModelResponse
from app.schema import Message
from app.testing.proxy import RecordingProxy
from tests.real_model_fixtures import real_settings

pytestmark = pytest.mark.real_model

#: SmolLM2's end tokens (<|endoftext|>, <|im_end|>): banned, the model writes until max_tokens.
SMOLLM2_NO_EOS = {"0": -100, "2": -100}


def user(text: str) -> list[Message]:
    return [Message.user_message(text)]


@pytest.mark.parametrize("config", ["smollm2", "smollm2-fc", "gemma3", "gemma3-fc"])
async def test_ask_and_request_report_what_the_server_said(config, real_llm, recording_proxy):
    """ask() returns the text; request() a ModelResponse whose finish reason, usage and text
    are exactly what the server reported for the non-streamed request we sent."""
    proxy = recording_proxy(config)
    llm = real_llm(config, base_url=proxy.base_url, max_tokens=24)

    text = await llm.ask(user("Say hello in one short sentence."), stream=False)
    assert isinstance(text, str) and text.strip()

    response = await llm.request(user("Name a colour."))
    assert isinstance(response, ModelResponse)
    exchange = proxy.chat_requests()[-1]
    sent, served = exchange.body, exchange.completion()
    assert exchange.status == 200 and served is not None, exchange
    assert sent["model"] == "local" and sent["max_tokens"] == 24
    assert "tools" not in sent
    assert response.finish_reason in ("stop", "length")
    assert response.finish_reason == served["finish_reason"]
    assert (response.message.content or "").strip() == (served["content"] or "").strip()
    assert response.usage.prompt_tokens > 0 and response.usage.completion_tokens > 0
    if served["usage"] is None:  # llama-cpp-python sends no usage in streams: counted here
        assert exchange.stream and response.usage.estimated
    else:  # the server's own numbers, taken as they are
        assert not response.usage.estimated
        assert response.usage.prompt_tokens == served["usage"]["prompt_tokens"]
        assert response.usage.completion_tokens == served["usage"]["completion_tokens"] <= 24
    # The LLM's running total counts both calls.
    assert llm.usage.requests == 2


async def test_streamed_turn_hands_out_the_text_and_estimates_usage(real_llm, recording_proxy):
    """With on_delta the turn is streamed: the pieces join to the returned text, and since the
    server reports no usage in streams the usage is counted locally and marked estimated."""
    proxy = recording_proxy("smollm2")
    llm = real_llm("smollm2", base_url=proxy.base_url, max_tokens=16)
    deltas: list[str] = []
    response = await llm.request(
        user("Describe the sea."), on_delta=deltas.append, logit_bias=SMOLLM2_NO_EOS
    )
    exchange = proxy.chat_requests()[-1]
    assert exchange.stream and exchange.status == 200
    assert len(deltas) > 1  # it arrived in pieces, as generated
    assert "".join(deltas) == response.message.content
    assert response.finish_reason == "length" and response.truncated
    assert response.usage.estimated
    assert response.usage.completion_tokens > 0 and response.usage.prompt_tokens > 0


async def test_cut_answer_says_length(real_llm):
    """A reply cut at max_tokens comes back with finish_reason "length" (truncated); asked
    unstreamed, the usage is the server's own count."""
    llm = real_llm("smollm2", max_tokens=2)
    response = await llm.request(
        user("Describe the sea in three sentences."), logit_bias=SMOLLM2_NO_EOS, stream=False
    )
    assert response.finish_reason == "length" and response.truncated
    assert response.usage.completion_tokens == 2 and not response.usage.estimated


async def test_context_overflow_is_a_typed_error_with_the_servers_window(real_llm, recording_proxy):
    """An over-long prompt: the server answers 400 context_length_exceeded; the framework
    raises ContextWindowExceededError with the window it learned from the message, and does
    not retry it (retrying the same request cannot help)."""
    proxy = recording_proxy("smollm2-2k")
    llm = real_llm("smollm2-2k", base_url=proxy.base_url, max_retries=3)
    big = " ".join(f"item{i}" for i in range(1500))
    with pytest.raises(ContextWindowExceededError) as info:
        await llm.request(user(big))
    chats = proxy.chat_requests()
    # (A streamed attempt first gets HTTP 200 and no events from this server; then plain.)
    assert [e.status for e in chats][-1:] == [400], [e.status for e in chats]
    assert [e.status for e in chats].count(400) == 1
    assert "context_length_exceeded" in chats[-1].response.decode()
    assert info.value.status_code == 400
    assert info.value.limit == 2048
    assert llm.context_window == 2048  # learned for the requests that follow


@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
async def test_timeout_names_the_stall_and_hangs_up(llama_pool, streamed):
    """A request that outlives its timeout (a long prompt: the first token takes seconds; no
    end token allowed afterwards) fails with an error naming the model, the endpoint and the
    time waited, and the framework hangs up, which is all a client can do to free the server.

    (llama-cpp-python 0.3.36 itself goes on generating for a client that left, streamed or not,
    so "the next request is served at once" cannot be asserted against it; the hang-up is
    observed by the proxy instead. The server is private to this test and killed after it.)
    """
    server = llama_pool.start_private("smollm2", f"timeout-{streamed}", n_ctx=8192)
    try:
        proxy = RecordingProxy(server.base_url).start()
        llm = LLM.create(llm_config=real_settings(proxy.base_url, max_tokens=6000))
        extra = {"on_delta": lambda _: None} if streamed else {}
        prompt = "Repeat these words: " + " ".join(f"w{i}" for i in range(300))
        started = time.monotonic()
        with pytest.raises(LLMTimeoutError) as info:
            await llm.request(user(prompt), timeout=2.0, logit_bias=SMOLLM2_NO_EOS, **extra)
        assert time.monotonic() - started < 2.0 + 10.0
        (exchange,) = proxy.chat_requests()
        assert exchange.client_left.wait(timeout=10), "the framework kept the connection open"
        message = str(info.value)
        assert "'local'" in message and proxy.base_url in message, message
        assert re.search(r"\b2(\.0+)?\s*(s|sec|seconds)\b", message), message
    finally:
        proxy.stop()
        server.stop()


async def test_streamed_overflow_is_not_mistaken_for_a_refused_stream(real_llm, recording_proxy):
    """llama-cpp-python answers a *streamed* over-long request with HTTP 200 and no events, the
    same shape as its refusal to stream tool calls. The framework still raises
    ContextWindowExceededError (from the non-streamed retry), and does not conclude that the
    endpoint cannot stream: the next small streamed turn is streamed."""
    proxy = recording_proxy("smollm2-2k")
    llm = real_llm("smollm2-2k", base_url=proxy.base_url, max_tokens=8)
    big = " ".join(f"item{i}" for i in range(1500))
    with pytest.raises(ContextWindowExceededError):
        await llm.request(user(big), on_delta=lambda _: None)
    proxy.clear()
    deltas: list[str] = []
    await llm.request(user("Say hi."), on_delta=deltas.append)
    assert [e.stream for e in proxy.chat_requests()] == [True], (
        "one overflow made the framework stop streaming to this endpoint"
    )
    assert deltas


async def test_a_plain_request_that_times_out_is_hung_up_and_retried_once(llama_pool):
    """Issue 29 item 6 on an endpoint that gets plain requests only (``stream = false``, as
    after a refused tool stream): each attempt that outlives ``timeout`` is hung up, and the
    request is asked again once, not ``max_retries`` times: llama-cpp-python goes on generating
    a plain answer whose client left, so every further retry would wait behind another one."""
    server = llama_pool.start_private("smollm2", "plain-timeout", n_ctx=8192)
    try:
        proxy = RecordingProxy(server.base_url).start()
        llm = LLM.create(
            llm_config=real_settings(proxy.base_url, max_tokens=6000, stream=False, max_retries=4)
        )
        prompt = "Repeat these words: " + " ".join(f"w{i}" for i in range(300))
        started = time.monotonic()
        with pytest.raises(LLMTimeoutError, match="gave up after 2 attempts"):
            await llm.request(user(prompt), timeout=2.0, logit_bias=SMOLLM2_NO_EOS)
        assert time.monotonic() - started < 2 * 2.0 + 10.0
        chats = proxy.chat_requests()
        assert [e.stream for e in chats] == [False, False]
        for exchange in chats:
            assert exchange.client_left.wait(timeout=10), "the framework kept a connection open"
    finally:
        proxy.stop()
        server.stop()
