"""The LLM wrapper over real HTTP: retries, error translation, usage, formats, backends."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from app.config import LLMSettings
from app.exceptions import (
    ContextWindowExceededError,
    ImagesNotSupportedError,
    LLMAuthenticationError,
    LLMBadRequestError,
    LLMConnectionError,
    LLMNotFoundError,
    LLMQuotaError,
    LLMRateLimitError,
    LLMResponseError,
    LLMServerError,
    LLMTimeoutError,
    ToolsNotSupportedError,
)
from app.llm import LLM
from app.llm.openai.http_transport import HttpTransport
from app.schema import Message
from app.testing import call, drop, error, raw, slow, text, tool_calls
from tests.conftest import TEST_API_KEY, llm_settings

USER = [Message.user_message("hi")]


async def test_ask_tool_returns_message_and_usage(llm_server, make_llm):
    llm_server.push(
        tool_calls(
            call("echo", {"text": "x"}),
            content="thinking",
            usage={"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
        )
    )
    llm = make_llm()
    msg = await llm.ask_tool(USER, tools=[{"type": "function", "function": {"name": "echo"}}])
    assert msg.role == "assistant" and msg.content == "thinking"
    assert msg.tool_calls[0].function.name == "echo"
    assert msg.tool_calls[0].function.arguments == '{"text": "x"}'
    assert (llm.total_input_tokens, llm.total_completion_tokens) == (11, 7)
    llm_server.push(text("x"))
    response = await llm.request(USER)
    assert response.finish_reason == "stop" and response.usage.requests == 1
    req = llm_server.requests[0]
    assert req.headers["authorization"] == f"Bearer {TEST_API_KEY}"
    assert req.body["max_tokens"] == 4096 and "temperature" in req.body


async def test_usage_accumulates_and_is_estimated_when_missing(llm_server, make_llm):
    llm_server.push(
        text("a", usage={"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}),
        text("b", usage=False),
    )
    llm = make_llm()
    first = await llm.request(USER, stream=False)
    second = await llm.request(USER, stream=False)
    assert llm.usage.requests == 2
    assert first.usage.total_tokens == 6 and not first.usage.estimated
    assert second.usage.estimated and second.usage.prompt_tokens > 0
    assert llm.usage.estimated and llm.usage.prompt_tokens > 5


async def test_ask_streams_and_collects_text(llm_server, make_llm):
    llm_server.push(text("The quick brown fox jumps"))
    llm = make_llm()
    assert await llm.ask(USER) == "The quick brown fox jumps"
    assert llm_server.requests[0].body["stream"] is True
    assert llm.usage.requests == 1


async def test_ask_stream_yields_deltas(llm_server, make_llm):
    llm_server.push(text("one two three four"))
    parts = [p async for p in make_llm().ask_stream(USER)]
    assert len(parts) >= 2 and "".join(parts) == "one two three four"


async def test_accepts_dict_messages_and_system_msgs(llm_server, make_llm):
    llm_server.push(text("ok"))
    await make_llm().ask(
        [{"role": "user", "content": "hi"}],
        system_msgs=[{"role": "system", "content": "be brief"}],
        stream=False,
    )
    assert llm_server.requests[0].body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
    ]


async def test_invalid_messages_are_developer_errors(make_llm):
    llm = make_llm()
    with pytest.raises(ValueError, match="role"):
        await llm.ask([{"content": "no role"}])
    with pytest.raises(ValueError, match="Invalid message role"):
        await llm.ask([{"role": "wizard", "content": "x"}])
    with pytest.raises(ValueError, match="tool_choice"):
        await llm.ask_tool(USER, tool_choice="sometimes")


@pytest.mark.parametrize(
    ("failure", "kind"),
    [
        (error(429, headers={"Retry-After": "0"}), LLMRateLimitError),
        (error(500), LLMServerError),
        (error(503), LLMServerError),
        # A proxy's error page while the model behind it restarts: transient, like any 5xx.
        (raw(502, "<html><title>502 Bad Gateway</title></html>", "text/html"), LLMServerError),
        (drop(), LLMConnectionError),
    ],
)
async def test_transient_failures_are_retried(llm_server, make_llm, failure, kind):
    llm_server.push(failure, failure, text("recovered"))
    llm = make_llm()
    assert await llm.ask(USER, stream=False) == "recovered"
    assert len(llm_server.requests) == 3


@pytest.mark.parametrize(
    ("failure", "kind"),
    [
        (error(500), LLMServerError),
        (drop(), LLMConnectionError),
        (error(429, headers={"Retry-After": "0"}), LLMRateLimitError),
    ],
)
async def test_retries_give_up_cleanly(llm_server, make_llm, failure, kind):
    llm_server.push(*[failure] * 4)
    llm = make_llm(max_retries=3)
    with pytest.raises(kind, match="gave up after 4 attempts") as info:
        await llm.ask_tool(USER)
    assert len(llm_server.requests) == 4
    assert info.value.attempts == 4


async def test_settings_set_after_construction_reach_the_next_request(llm_server, make_llm):
    """Upstream code sets ``llm.model = "x"`` and ``llm.max_retries = 1`` on a built LLM."""
    llm = make_llm(max_retries=3)
    llm_server.push(text("one"))
    await llm.ask(USER, stream=False)
    transport = llm.transport
    assert isinstance(transport, HttpTransport)
    llm.model = "gpt-4o"
    llm.max_retries = 1
    llm_server.push(error(500), error(500))
    with pytest.raises(LLMServerError, match="gave up after 2 attempts"):
        await llm.ask(USER, stream=False)
    assert [r.body["model"] for r in llm_server.requests] == ["gpt-4o-mini", "gpt-4o", "gpt-4o"]
    assert llm.transport is transport  # reached the same way: the same connections
    llm.api_key = "sk-another-key-123456"
    llm_server.push(text("two"))
    assert await llm.ask(USER, stream=False) == "two"
    assert llm.transport is not transport
    assert llm_server.requests[-1].headers["authorization"] == "Bearer sk-another-key-123456"
    assert transport.connected
    await llm.aclose()  # the replaced transport too
    assert not transport.connected
    # Checked like the config file: a bad value or an unknown setting raises, nothing changes.
    with pytest.raises(ValueError, match="max_retries"):
        llm.max_retries = -1
    with pytest.raises(TypeError, match=r"Unknown LLM setting.*modle"):
        llm.configure(modle="x")
    assert (llm.model, llm.max_retries) == ("gpt-4o", 1)


async def test_retry_after_is_honoured(llm_server, make_llm):
    llm_server.push(error(429, headers={"Retry-After": "0.3"}), text("ok"))
    start = time.monotonic()
    assert await make_llm().ask(USER, stream=False) == "ok"
    assert time.monotonic() - start >= 0.3


async def test_retry_after_too_long_is_not_waited_for(llm_server, make_llm):
    llm_server.push(error(429, headers={"Retry-After": "3600"}))
    with pytest.raises(LLMRateLimitError) as info:
        await make_llm().ask(USER, stream=False)
    assert info.value.retry_after == 3600
    assert len(llm_server.requests) == 1


async def test_timeouts_are_retried(llm_server, make_llm):
    llm_server.push(slow(2.0, text("late")), text("on time"))
    llm = make_llm(timeout=0.3)
    assert await llm.ask(USER, stream=False) == "on time"


async def test_timeout_gives_up(llm_server, make_llm):
    llm_server.push(slow(2.0, text("late")), slow(2.0, text("late")))
    with pytest.raises(LLMTimeoutError, match="timed out"):
        await make_llm(timeout=0.2, max_retries=1).ask_tool(USER)


@pytest.mark.parametrize(
    ("failure", "kind"),
    [
        (error(401, "Incorrect API key"), LLMAuthenticationError),
        (error(403, "forbidden"), LLMAuthenticationError),
        (error(400, "bad field"), LLMBadRequestError),
        (error(404, "no such model"), LLMNotFoundError),
        (error(429, "You exceeded your current quota", code="insufficient_quota"), LLMQuotaError),
        (error(400, "too long", code="context_length_exceeded"), ContextWindowExceededError),
        (
            error(400, "This model's maximum context length is 8192 tokens"),
            ContextWindowExceededError,
        ),
        (
            error(400, "registry.ollama.ai/library/gemma does not support tools"),
            ToolsNotSupportedError,
        ),
        (
            error(
                400,
                '"auto" tool choice requires --enable-auto-tool-choice and '
                "--tool-call-parser to be set",
            ),
            ToolsNotSupportedError,
        ),
    ],
)
async def test_final_errors_are_not_retried(llm_server, make_llm, failure, kind):
    llm_server.push(failure, text("never reached"))
    with pytest.raises(kind) as info:
        await make_llm(tool_calling="native").ask_tool(
            USER, tools=[{"type": "function", "function": {"name": "x"}}]
        )
    assert len(llm_server.requests) == 1
    assert "gpt-4o-mini" in str(info.value) or kind is LLMAuthenticationError


async def test_tools_rejection_names_the_model(llm_server, make_llm):
    llm_server.push(error(400, "tools is not supported for this model"))
    with pytest.raises(ToolsNotSupportedError, match=r"Model 'gpt-4o-mini'.*function calling"):
        await make_llm(tool_calling="native").ask_tool(
            USER, tools=[{"type": "function", "function": {"name": "x"}}]
        )


async def test_context_window_is_checked_before_sending(llm_server, make_llm):
    """With an exact count (a real encoding) an oversized request never leaves."""
    from app.tokens import clear_encoding_cache, register_encoding
    from tests.test_tokens import tiny_encoding

    register_encoding(tiny_encoding(), name="o200k_base")
    try:
        llm = make_llm(max_input_tokens=50)
        with pytest.raises(ContextWindowExceededError) as info:
            await llm.ask_tool([Message.user_message("word " * 400)])
        assert info.value.limit == 50 and info.value.tokens > 50
        assert llm_server.requests == []
        # A request that fits goes through: the limit is per request, not a lifetime budget.
        llm_server.push(text("a"), text("b"))
        await llm.ask(USER, stream=False)
        await llm.ask(USER, stream=False)
    finally:
        clear_encoding_cache()


async def test_an_estimated_count_never_refuses_a_borderline_request(llm_server, make_llm):
    """A model whose tokenizer is not known here is counted by a guess: over the window by
    less than any guess could be off, the server decides."""
    llm = make_llm(model="local-llama", max_input_tokens=50)
    assert llm.token_counter.estimated
    llm_server.push(text("fits after all"))
    assert await llm.ask([Message.user_message("word " * 100)]) == "fits after all"
    assert 50 < await llm.count_request_tokens([Message.user_message("word " * 100)]) < 250


async def test_malformed_response_body(llm_server, make_llm):
    """Invalid JSON is retried a bounded number of times (3 attempts), then reported."""
    llm_server.push(*[raw(200, b"{not json")] * 4)
    with pytest.raises(LLMResponseError, match="invalid JSON"):
        await make_llm(max_retries=5).ask_tool(USER)
    assert len(llm_server.requests) == 3


async def test_response_without_choices(llm_server, make_llm):
    llm_server.push(*[raw(200, b'{"choices": []}')] * 3)
    with pytest.raises(LLMResponseError, match="no choices"):
        await make_llm().request(USER, stream=False)
    assert len(llm_server.requests) == 3  # bounded retries of a malformed reply


async def test_reasoning_models_use_max_completion_tokens(llm_server, make_llm):
    llm_server.push(text("ok"), text("ok"))
    await make_llm(model="o3-mini").ask(USER, stream=False)
    await make_llm(model="my-model", reasoning_model=True).ask(USER, stream=False)
    for req in llm_server.requests:
        assert req.body["max_completion_tokens"] == 4096
        assert "temperature" not in req.body and "max_tokens" not in req.body


async def test_ask_with_images(llm_server, make_llm):
    llm_server.push(text("a cat"))
    answer = await make_llm(model="gpt-4o").ask_with_images(
        [Message.user_message("what is this?")], ["https://example.invalid/cat.png"]
    )
    assert answer == "a cat"
    content = llm_server.requests[0].body["messages"][-1]["content"]
    assert content[0] == {"type": "text", "text": "what is this?"}
    assert content[1]["image_url"]["url"] == "https://example.invalid/cat.png"


async def test_an_image_dict_without_a_url_is_a_clear_error(llm_server, make_llm):
    # It used to fail deep inside formatting with an AttributeError on None.
    llm = make_llm(model="gpt-4o")
    for image in ({"detail": "low"}, {"image_url": {}}, {"url": 5}):
        with pytest.raises(ValueError, match="needs a 'url'"):
            await llm.ask_with_images(USER, [image])
    assert llm_server.requests == []
    llm_server.push(text("ok"))
    await llm.ask_with_images(USER, [{"image_url": {"url": "https://example.invalid/a.png"}}])
    content = llm_server.requests[0].body["messages"][-1]["content"]
    assert content[-1]["image_url"]["url"] == "https://example.invalid/a.png"


async def test_images_to_a_text_model_are_an_error(llm_server, make_llm):
    with pytest.raises(ImagesNotSupportedError, match="supports_images"):
        await make_llm(model="deepseek-chat").ask_with_images(USER, ["aGVsbG8="])
    assert llm_server.requests == []
    # The config flag overrides the name-based default.
    llm_server.push(text("ok"))
    await make_llm(model="deepseek-chat", supports_images=True).ask_with_images(USER, ["aGVsbG8="])


async def test_singleton_per_config_name_and_independent_instances(llm_server):
    settings = llm_settings(llm_server)
    a = LLM("profile-a", llm_config={"default": settings})
    assert LLM("profile-a") is a
    assert LLM("profile-b", llm_config={"default": settings}) is not a
    independent = LLM.create(llm_config=settings)
    assert independent is not a and LLM("profile-a") is a
    other = LLM.create(llm_config=settings, model="gpt-4.1")
    assert other.model == "gpt-4.1" and a.model == "gpt-4o-mini"


async def test_named_profile_selected(llm_server):
    profiles = {
        "default": llm_settings(llm_server),
        "vision": llm_settings(llm_server, model="gpt-4o", max_tokens=100),
    }
    assert LLM("vision", llm_config=profiles).model == "gpt-4o"
    assert LLM("unknown-agent", llm_config=profiles).model == "gpt-4o-mini"


async def test_azure_routing(llm_server):
    llm = LLM.create(
        llm_config=LLMSettings(
            model="my-deployment",
            base_url=f"http://127.0.0.1:{llm_server.port}",
            api_key="azure-key-123456",
            api_type="azure",
            api_version="2024-10-21",
            max_retries=0,
        )
    )
    llm_server.push(text("from azure"))
    assert await llm.ask(USER, stream=False) == "from azure"
    req = llm_server.requests[0]
    assert req.path == "/openai/deployments/my-deployment/chat/completions"
    assert req.query["api-version"] == "2024-10-21"
    assert req.headers["api-key"] == "azure-key-123456"


async def test_tool_results_never_orphaned_on_the_wire(llm_server, make_llm):
    """A tool message whose call was trimmed away is dropped; an unanswered call gets a stub."""
    llm_server.push(text("ok"))
    history = [
        Message.tool_message("stale", name="x", tool_call_id="gone"),
        Message.user_message("go"),
        Message.from_tool_calls([{"id": "c1", "function": {"name": "x", "arguments": "{}"}}]),
    ]
    await make_llm().ask(history, stream=False)
    sent = llm_server.requests[0].body["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
    assert sent[2]["tool_call_id"] == "c1" and "not executed" in sent[2]["content"]


@pytest.mark.e2e
def test_importing_the_agent_does_not_import_openai():
    code = (
        "import sys, app.agent.toolcall, app.llm;"
        "assert 'openai' not in sys.modules, 'openai imported';"
        "assert 'tiktoken' not in sys.modules, 'tiktoken imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# ---- the facade's edge: upstream's dicts become typed messages --------------------------------


async def test_upstream_dicts_reach_a_model_as_typed_messages():
    from app.testing import FunctionModel

    model = FunctionModel(lambda messages, info: "seen")
    llm = LLM.from_model(model)
    png = (
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAAB"
        "JRU5ErkJggg=="
    )
    await llm.ask(
        [
            {"role": "system", "content": "be brief"},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is"},
                    {"type": "image_url", "image_url": {"url": png, "detail": "low"}},
                    {"type": "text", "text": "this?"},
                ],
            },
        ]
    )
    system, user = model.requests[0][0]
    assert isinstance(user, Message) and system.content == "be brief"
    assert user.content == "What is\nthis?"
    assert user.images is not None and user.images[0].detail == "low"
    assert user.images[0].url == f"data:image/png;base64,{png}"  # a media type, not a guess


@pytest.mark.parametrize(
    "bad",
    [
        {"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "x"}}]},
        {"role": "wizard", "content": "hi"},
        {"content": "no role"},
        {"role": "user", "content": {"nested": "object"}},
        "just a string",
    ],
)
async def test_a_message_no_model_could_take_is_refused_before_sending(llm_server, make_llm, bad):
    with pytest.raises((ValueError, TypeError)):
        await make_llm().ask([bad])
    assert llm_server.requests == []
