"""Counting like a real server (issue 29, items 2 and 3), on llama-cpp-python with SmolLM2.

Our estimate of SmolLM2's prompts is far from the server's count; after one answer it is
scaled to within 10 %. A runaway tool-argument generation, forced by a tool whose schema asks
for a longer argument than the window holds (the server's grammar obeys it and ignores the
request's ``max_tokens``), makes the real server send its "you requested N tokens" 400: it is
asked once more, then fails as a server fault, and no window is learned below what fit.
"""

from __future__ import annotations

import pytest

from app.exceptions import ContextWindowExceededError, LLMServerError
from app.llm import LLM
from app.schema import Message
from app.testing.proxy import RecordingProxy
from tests.real_model_fixtures import LlamaPool, real_settings

pytestmark = pytest.mark.real_model

ESSAY = (
    "The lighthouse keeper climbed the spiral stairs every evening at dusk, carrying a can of "
    "oil and a cloth for the great lens. Ships passing the headland relied on the beam to find "
    "the channel between the rocks, and the keeper kept a log of every vessel he saw. "
)


def conversation(paragraphs: int, question: str) -> list[Message]:
    return [
        Message.system_message("You are a helpful assistant. Answer in one short sentence."),
        Message.user_message(ESSAY * paragraphs + "\n\n" + question),
    ]


async def test_counts_match_the_server_after_one_answer(real_llm) -> None:
    llm = real_llm("smollm2", max_tokens=8)
    first = conversation(3, "What did the keeper carry?")
    second = [
        *conversation(6, "Who relied on the beam?"),
        Message.assistant_message("Ships did."),
        Message.user_message("And what did the keeper write down? " + ESSAY),
    ]
    unscaled = await llm.count_request_tokens(second)
    answered = await llm.request(first, stream=False)
    assert not answered.usage.estimated
    predicted = await llm.count_request_tokens(second)
    served = (await llm.request(second, stream=False)).usage.prompt_tokens

    assert abs(predicted - served) <= 0.10 * served, (unscaled, predicted, served)
    assert abs(unscaled - served) > 0.10 * served  # the estimate alone was far off
    assert llm.server_counts.accepted == served


#: A tool whose argument the server's grammar must make longer than any window here.
RUNAWAY_TOOL = {
    "type": "function",
    "function": {
        "name": "python_execute",
        "description": "Run Python code.",
        "parameters": {
            "type": "object",
            "properties": {"code": {"type": "string", "minLength": 2000}},
            "required": ["code"],
        },
    },
}
SMALL_TOOL = {
    "type": "function",
    "function": {
        "name": "python_execute",
        "description": "Run Python code.",
        "parameters": {
            "type": "object",
            "properties": {"code": {"type": "string", "maxLength": 40}},
            "required": ["code"],
        },
    },
}
#: llama-cpp-python's smallest window; the prompt below leaves under 100 tokens of it to fill.
WINDOW = 512


@pytest.fixture
def small_window_server(llama_pool: LlamaPool):
    server = llama_pool.start_private("smollm2-fc", "runaway", n_ctx=WINDOW)
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.timeout(900)  # two runaway generations: up to minutes each on a busy machine
async def test_a_runaway_generation_is_a_server_fault_not_a_smaller_window(
    small_window_server,
) -> None:
    proxy = RecordingProxy(small_window_server.base_url).start()
    try:
        llm = LLM.create(
            llm_config=real_settings(proxy.base_url, max_tokens=16, stream=False, timeout=500)
        )
        ask = [
            Message.system_message("Use the tools. " + ESSAY * 4),
            Message.user_message("Run python_execute with code that prints hello."),
        ]
        accepted = await llm.request(ask, tools=[SMALL_TOOL])
        fit = accepted.usage.prompt_tokens
        assert not accepted.usage.estimated and 0 < fit < WINDOW

        with pytest.raises(LLMServerError) as info:
            await llm.request(ask, tools=[RUNAWAY_TOOL])
        assert not isinstance(info.value, ContextWindowExceededError)
        assert "cannot be true of the request" in str(info.value)

        refused = proxy.chat_requests()[1:]
        assert len(refused) == 2  # asked once more
        for exchange in refused:
            assert exchange.status == 400 and exchange.body["max_tokens"] == 16
            error = exchange.response_json()["error"]
            assert error["code"] == "context_length_exceeded"
            assert f"maximum context length is {WINDOW} tokens" in error["message"]
            assert "in the messages, 16 in the completion" in error["message"]
        assert llm.context_window is None  # no window learned, least of all one below `fit`
        assert llm.server_counts.accepted == fit
    finally:
        proxy.stop()
