"""Counting like the server (issue 29, items 2 and 3): the ratio of the server's prompt tokens
to ours is learned from the usage it reports and remembered per endpoint and model; an
overflow whose numbers contradict what was sent is a server fault asked once more, and no
window is learned below a prompt the endpoint accepted. The overflow bodies are the exact
bytes llama-cpp-python's server sends (``llama_cpp/server/errors.py``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from app.agent.result import StopReason
from app.agent.toolcall import ToolCallAgent
from app.exceptions import ContextWindowExceededError, LLMServerError
from app.llm.endpoint_memory import EndpointMemory
from app.llm.windows import ServerCounts, context_numbers
from app.schema import AgentState, Message
from app.testing import raw, text

#: llama-cpp-python's answer when the prompt it evaluates reaches ``n_ctx`` (status 400).
#: With tools in "auto" mode it grows the prompt itself by the tool arguments it generates,
#: ignoring ``max_tokens``: a runaway generation ends with this, whatever the request's size.
RUNAWAY = (
    b'{"error":{"message":"This model\'s maximum context length is 4096 tokens. However, you '
    b"requested 4608 tokens (4096 in the messages, 512 in the completion). Please reduce the "
    b'length of the messages or completion.","type":"invalid_request_error","param":"messages",'
    b'"code":"context_length_exceeded"}}'
)
#: The same server without ``max_tokens`` in the request.
NO_MAX_TOKENS = (
    "This model's maximum context length is 2048 tokens. However, you requested 2100 tokens "
    "(2100 in the messages, None in the completion). Please reduce the length of the messages "
    "or completion."
)
#: OpenAI and vLLM: the prompt fits, but not with the room asked for the answer.
WITH_COMPLETION = (
    "This model's maximum context length is 4096 tokens. However, you requested 4512 tokens "
    "(4000 in the messages, 512 in the completion). Please reduce the length of the messages "
    "or completion."
)


def conversation(words: int) -> list[Message]:
    return [
        Message.system_message("You are a helpful agent."),
        Message.user_message(" ".join(f"word{i % 50}" for i in range(words))),
    ]


def overflow(limit: int | None, tokens: int | None) -> ContextWindowExceededError:
    return ContextWindowExceededError("overflow", limit=limit, tokens=tokens)


def test_overflow_messages_name_the_prompt_not_the_prompt_plus_answer() -> None:
    body = json.loads(RUNAWAY)
    assert context_numbers(body["error"]["message"], body) == (4096, 4096)
    assert context_numbers(NO_MAX_TOKENS) == (2048, 2100)
    # The prompt alone fits: the room for it is the window less the answer's max_tokens.
    assert context_numbers(WITH_COMPLETION) == (3584, 4000)
    assert context_numbers("Requested tokens (2100) exceed context window of 2048") == (2048, 2100)


@pytest.mark.parametrize("ratio", [0.55, 1.6], ids=["we-count-high", "we-count-low"])
async def test_counts_follow_the_servers_after_one_answer(llm_server, make_llm, ratio) -> None:
    llm = make_llm(model="local")
    first, second = conversation(300), conversation(900)
    ours_first = await llm.count_request_tokens(first)
    ours_second = await llm.count_request_tokens(second)
    served = round(ours_first * ratio)
    llm_server.push(text("ok", usage={"prompt_tokens": served, "completion_tokens": 1}))
    await llm.request(first)

    assert llm.server_counts.accepted == served
    assert await llm.count_request_tokens(first) == served
    assert await llm.count_request_tokens(second) == pytest.approx(ours_second * ratio, rel=0.01)
    # A model counted with its own tokenizer is not scaled: its count is the server's.
    exact = make_llm(model="gpt-4o-mini")
    before = await exact.count_request_tokens(first)
    llm_server.push(text("ok", usage={"prompt_tokens": before * 2, "completion_tokens": 1}))
    await exact.request(first)
    assert await exact.count_request_tokens(first) == before


async def test_newer_answers_weigh_more(llm_server, make_llm) -> None:
    llm = make_llm(model="local")
    convo = conversation(400)
    ours = await llm.count_request_tokens(convo)
    for ratio in (0.5, 0.5, 0.8):
        llm_server.push(text("ok", usage={"prompt_tokens": round(ours * ratio)}))
        await llm.request(convo)
        await llm.count_request_tokens(convo)  # counting learns from the last answer
    assert 0.65 < llm.server_counts.ratio < 0.8  # mostly the newest, some of the older


async def test_the_ratio_is_remembered_for_the_endpoint(
    llm_server, make_llm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENMANUS_CACHE_DIR", str(tmp_path / "cache"))
    convo = conversation(500)
    llm = make_llm(model="local")
    ours = await llm.count_request_tokens(convo)
    llm_server.push(text("ok", usage={"prompt_tokens": round(ours * 0.6)}))
    await llm.request(convo)
    await llm.count_request_tokens(convo)

    saved = json.loads((tmp_path / "cache" / "endpoints.json").read_text())
    (entry,) = saved["endpoints"].values()
    assert entry["model"] == "local" and entry["features"] == {}
    assert entry["counts"]["ratio"] == pytest.approx(0.6, rel=0.01)
    assert entry["counts"]["accepted"] == round(ours * 0.6)
    # A new process (a new LLM) counts like the server from its first request on.
    again = make_llm(model="local")
    assert await again.count_request_tokens(convo) == pytest.approx(ours * 0.6, rel=0.01)
    assert again.server_counts.accepted == round(ours * 0.6)
    # Another model on the same server learned nothing yet.
    assert await make_llm(model="other").count_request_tokens(convo) == ours
    # Without the capability cache nothing is written or read.
    os.unlink(tmp_path / "cache" / "endpoints.json")
    private = make_llm(model="local", capability_cache=False)
    llm_server.push(text("ok", usage={"prompt_tokens": round(ours * 0.6)}))
    await private.request(convo)
    await private.count_request_tokens(convo)
    assert not (tmp_path / "cache" / "endpoints.json").exists()


async def test_a_runaway_overflow_is_a_server_fault_asked_once_more(
    llm_server, make_llm, caplog
) -> None:
    llm = make_llm(model="local", max_retries=3)
    convo = conversation(600)
    ours = await llm.count_request_tokens(convo)
    llm_server.push(text("ok", usage={"prompt_tokens": round(ours * 0.6)}))
    await llm.request(convo)

    llm_server.push(raw(400, RUNAWAY), text("second try", usage={"prompt_tokens": ours * 0.6}))
    reply = await llm.request(convo)
    assert reply.message.content == "second try"
    assert len(llm_server.requests) == 3
    assert llm.context_window is None  # nothing learned from the fault

    llm_server.push(raw(400, RUNAWAY), raw(400, RUNAWAY))
    with pytest.raises(LLMServerError) as info:
        await llm.request(convo)
    assert not isinstance(info.value, ContextWindowExceededError)
    assert "it counts 4096 prompt tokens in a request of about" in str(info.value)
    assert len(llm_server.requests) == 5  # asked once more, not max_retries times
    assert llm.context_window is None
    assert llm.server_counts.ratio == pytest.approx(0.6, rel=0.01)  # not skewed by it


async def test_a_runaway_overflow_does_not_end_an_agent_as_context_overflow(
    llm_server, make_llm
) -> None:
    llm = make_llm(model="local", max_retries=0)
    convo = conversation(600)
    ours = await llm.count_request_tokens(convo)
    llm_server.push(text("ok", usage={"prompt_tokens": round(ours * 0.6)}))
    await llm.request(convo)  # the endpoint answered, so its counts are known
    llm_server.push(raw(400, RUNAWAY), raw(400, RUNAWAY))
    agent = ToolCallAgent(llm=llm, max_steps=2)
    result = await agent.run("Write a long program.")
    assert result.state == AgentState.ERROR and result.stop_reason == StopReason.ERROR
    assert "cannot be true of the request" in (result.failure or "")
    assert llm.context_window is None


async def test_a_real_overflow_teaches_window_and_ratio(llm_server, make_llm) -> None:
    llm = make_llm(model="local")
    convo = conversation(1500)
    ours = await llm.count_request_tokens(convo)
    served = round(ours * 0.6)
    message = f"Requested tokens ({served}) exceed context window of 1024"
    llm_server.push(error_body(message))
    with pytest.raises(ContextWindowExceededError) as info:
        await llm.request(convo)
    assert (info.value.limit, info.value.tokens) == (1024, served)
    assert len(llm_server.requests) == 1  # a real overflow is not asked again
    assert llm.context_window == 1024
    assert await llm.count_request_tokens(convo) == served


def error_body(message: str) -> object:
    body = {"error": {"message": message, "type": "invalid_request_error"}}
    return raw(400, json.dumps(body).replace("invalid_request_error", "context_length_exceeded"))


async def test_a_window_below_an_accepted_prompt_is_a_fault_unless_the_numbers_hold(
    llm_server, make_llm
) -> None:
    llm = make_llm(model="local", max_retries=0)
    convo = conversation(1500)
    ours = await llm.count_request_tokens(convo)
    served = round(ours * 0.6)
    llm_server.push(text("ok", usage={"prompt_tokens": served}))
    await llm.request(convo)
    # It names a window below the prompt it just answered, and no prompt size: not believed.
    bare = error_body("This model's maximum context length is 512 tokens.")
    llm_server.push(bare, bare)
    with pytest.raises(LLMServerError, match="names a 512-token window but accepted"):
        await llm.request(convo)
    assert llm.context_window is None
    # Numbers that hold together (the server was restarted with a smaller window): believed,
    # and the accepted size is forgotten.
    llm_server.push(error_body(f"Requested tokens ({served}) exceed context window of 512"))
    with pytest.raises(ContextWindowExceededError):
        await llm.request(convo)
    assert llm.context_window == 512
    assert llm.server_counts.accepted == 0


def test_the_window_after_an_overflow_can_scale_up_and_never_below_what_fit() -> None:
    counts = ServerCounts("http://127.0.0.1:1/v1", "m", None)
    # Issue 29: the server counted 2,056 where we counted 3,582; its 2,048-token window is
    # 3,567 of our tokens, not 2,048.
    assert counts.window_after(overflow(2048, 2056), 3582) == 3568
    assert counts.window_after(overflow(2048, 3000), 2000) == 1365
    assert counts.window_after(overflow(None, 3000), 2000) is None
    counts.answered([], None, 1976)
    assert counts.window_after(overflow(2048, 4096), 2000) == 1976


def test_contradictions_are_judged_on_estimates_only() -> None:
    counts = ServerCounts("http://127.0.0.1:1/v1", "m", None)
    # Uncalibrated, our estimate may be off by up to 2.5x.
    assert counts.contradiction(overflow(4096, 4096), 2000, exact=False) == ""
    assert "4096 prompt tokens" in counts.contradiction(overflow(4096, 4096), 1500, exact=False)
    counts.observe(1000, 600)  # calibrated: the server counts 0.6 of ours
    assert "about 1200" in counts.contradiction(overflow(4096, 4096), 2000, exact=False)
    assert counts.contradiction(overflow(2048, 2100), 3400, exact=False) == ""
    # No bigger than a prompt it answered, yet counted 16 % above our calibrated count: the
    # numbers of the real-model runaway (llama-cpp-python's smallest window, 512).
    counts.answered([], None, 441)
    assert "no bigger than the 441-token prompt" in counts.contradiction(
        overflow(512, 513), 737, exact=False
    )
    assert counts.contradiction(overflow(512, 470), 737, exact=False) == ""
    # The model's own tokenizer: the server's numbers are taken as they come.
    assert counts.contradiction(overflow(4096, 4096), 100, exact=True) == ""
    # Implausible observations teach nothing.
    counts.observe(1000, 50_000)
    counts.observe(10, 6)
    assert counts.ratio == pytest.approx(0.6)


def test_requests_without_tools_keep_a_ratio_of_their_own() -> None:
    """A summary request (plain prose, no tools) counts unlike the agent's requests with tool
    schemas: its answer must not move the ratio those are counted with (on the real 2,048-token
    run it moved 0.68 to 0.80, and compaction then dropped turns a summary would have kept)."""
    counts = ServerCounts("http://127.0.0.1:1/v1", "m", None)
    counts.observe(1000, 680)
    counts.observe(1000, 900, tools=False)
    assert counts.ratio == pytest.approx(0.68)
    assert counts.scale(1000) == 680 and counts.scale(1000, tools=False) == 900
    # A kind with nothing learned yet borrows the other's ratio.
    fresh = ServerCounts("http://127.0.0.1:1/v1", "m", None)
    fresh.observe(1000, 600, tools=False)
    assert fresh.scale(1000) == 600


def test_memory_counts_survive_and_expire(tmp_path: Path) -> None:
    path = tmp_path / "endpoints.json"
    now = [1_000_000.0]
    memory = EndpointMemory(path, ttl=100.0, clock=lambda: now[0])
    url = "http://127.0.0.1:8080/v1"
    assert memory.counts(url, "m") is None
    memory.remember_counts(url, "m", ratio=0.6, accepted=1976)
    memory.remember(url, "m", "stream_tools")
    fresh = EndpointMemory(path, ttl=100.0, clock=lambda: now[0])
    facts = fresh.counts(url + "/", "m")
    assert facts is not None and (facts.ratio, facts.accepted) == (0.6, 1976)
    assert fresh.refused(url, "m") == {"stream_tools"}
    memory.remember_counts(url, "m", accepted=2100)  # the ratio is kept
    assert (memory.counts(url, "m").ratio, memory.counts(url, "m").accepted) == (0.6, 2100)
    memory.remember_counts(url, "m", ratio=0.7, accepted=0)  # accepted forgotten
    assert (memory.counts(url, "m").ratio, memory.counts(url, "m").accepted) == (0.7, 0)
    now[0] += 101
    assert memory.counts(url, "m") is None


def test_memory_ignores_implausible_counts(tmp_path: Path) -> None:
    path = tmp_path / "endpoints.json"
    url = "http://127.0.0.1:8080/v1"
    entries = {
        f"{url} a": {"model": "a", "counts": {"at": 2e9, "ratio": 99.0, "accepted": 5}},
        f"{url} b": {"model": "b", "counts": {"at": 2e9, "ratio": True, "accepted": -1}},
        f"{url} c": {"model": "c", "counts": {"ratio": 0.5}},
        f"{url} d": {"model": "d", "counts": "nonsense"},
    }
    path.write_text(json.dumps({"version": 1, "endpoints": entries}))
    memory = EndpointMemory(path, clock=lambda: 2e9)
    facts = memory.counts(url, "a")
    assert facts is not None and (facts.ratio, facts.accepted) == (None, 5)
    assert [memory.counts(url, m) for m in "bcd"] == [None, None, None]


def test_entries_with_counts_only_are_kept_until_they_expire(tmp_path: Path) -> None:
    path = tmp_path / "endpoints.json"
    now = [1_000_000.0]
    memory = EndpointMemory(path, ttl=100.0, clock=lambda: now[0])
    url = "http://127.0.0.1:8080/v1"
    memory.remember_counts(url, "old", ratio=0.5, accepted=100)
    now[0] += 60
    memory.remember_counts(url, "new", ratio=0.7)
    assert {e["model"] for e in json.loads(path.read_text())["endpoints"].values()} == {
        "old",
        "new",
    }
    now[0] += 60  # "old" expired: dropped at the next write
    memory.remember(url, "new", "stream")
    saved = json.loads(path.read_text())["endpoints"]
    assert [e["model"] for e in saved.values()] == ["new"]
    assert saved[f"{url} new"]["counts"]["ratio"] == 0.7
    assert saved[f"{url} new"]["features"] == {"stream": now[0]}
