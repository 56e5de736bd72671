"""Anthropic's Messages API as a model (``app.llm.anthropic``), through the real anthropic SDK
against the scripted Anthropic server over HTTP: text, streaming, tools, images, usage, stop
reasons, errors and retries, extended thinking (sessions included) and prompt caching."""

from __future__ import annotations

import base64
import json
import subprocess
import sys

import pytest

from app.agent.manus import Manus
from app.agent.toolcall import ToolCallAgent
from app.config import ModelPrice
from app.exceptions import (
    ConfigError,
    ContextWindowExceededError,
    LLMAuthenticationError,
    LLMBadRequestError,
    LLMEndpointError,
    LLMNotFoundError,
    LLMRateLimitError,
    LLMResponseError,
    LLMServerError,
)
from app.llm import LLM, ModelParams, ToolDefinition
from app.llm.anthropic import AnthropicModel
from app.llm.pricing import cost_of
from app.schema import AgentState, ImagePart, Message, ThinkingBlock
from app.session import SessionStore
from app.testing import call, error, raw, text, tool_calls
from app.testing.anthropic_server import API_VERSIONS, SCRIPTED_API_KEY, ScriptedAnthropicServer
from app.testing.replies import stream_error
from tests.anthropic_helpers import (
    MODEL,
    PRICE,
    anthropic_model,
    anthropic_settings,
    anthropic_stack,
    notes_script,
)

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 32).decode()
JPEG = base64.b64encode(b"\xff\xd8\xff\xe0" + b"\0" * 32).decode()
ADD = ToolDefinition(
    "add",
    "Add two numbers.",
    {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}},
)


def facade(model: AnthropicModel, **overrides: object) -> LLM:
    """The LLM facade over ``model``, retrying at once (no backoff wait)."""
    settings = {"max_retries": 3, "retry_min_wait": 0.001, "retry_max_wait": 0.01}
    return LLM.from_model(model, **{**settings, **overrides})


def marks(body: dict) -> int:
    """Blocks marked cache_control in a request body."""
    count = sum("cache_control" in tool for tool in body.get("tools", []))
    system = body.get("system")
    count += sum("cache_control" in block for block in system) if isinstance(system, list) else 0
    for message in body["messages"]:
        for block in message["content"]:
            count += "cache_control" in block
    return count


# ---- text, streaming, usage ---------------------------------------------------------------


async def test_a_text_answer_through_the_sdk_with_the_api_headers_and_usage() -> None:
    with anthropic_stack([text("Hello there.")], prompt_cache=False) as (server, model):
        response = await model.request(
            [Message.system_message("Be brief."), Message.user_message("hi")], ModelParams()
        )
        await model.aclose()
    assert response.message.content == "Hello there."
    assert response.finish_reason == "stop" and response.reasoning is None
    (request,) = server.message_requests
    # The SDK 1.x sends x-api-key and version 2023-06-01; 2.x a bearer token and 2026-10-21.
    headers = request.headers
    key = headers.get("x-api-key") or headers["authorization"].removeprefix("Bearer ")
    assert key == SCRIPTED_API_KEY and headers["anthropic-version"] in API_VERSIONS
    body = request.body
    assert body["system"] == [{"type": "text", "text": "Be brief."}]
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert body["model"] == MODEL and body["max_tokens"] == 4096 and "stream" not in body
    use = server.cache_uses[0]
    assert response.usage.prompt_tokens == use.total > 0
    assert response.usage.completion_tokens > 0 and response.usage.requests == 1


async def test_text_streams_to_on_delta_in_pieces() -> None:
    pieces: list[str] = []
    with anthropic_stack([text("one two three four five")]) as (server, model):
        response = await model.request(
            [Message.user_message("count")], ModelParams(on_delta=pieces.append)
        )
    assert len(pieces) > 1 and "".join(pieces) == "one two three four five"
    assert response.message.content == "one two three four five"
    assert server.message_requests[0].body["stream"] is True
    assert response.usage.prompt_tokens == server.cache_uses[0].total


async def test_a_profile_that_says_stream_false_hands_the_text_over_whole() -> None:
    pieces: list[str] = []
    with anthropic_stack([text("all at once")], stream=False) as (server, model):
        await model.request([Message.user_message("x")], ModelParams(on_delta=pieces.append))
    assert pieces == ["all at once"] and "stream" not in server.message_requests[0].body


@pytest.mark.parametrize(
    ("scripted", "ours"),
    [
        ("stop", "stop"),
        ("stop_sequence", "stop"),
        ("length", "length"),
        ("content_filter", "content_filter"),
        ("model_context_window_exceeded", "length"),
        ("pause_turn", "pause_turn"),
    ],
)
@pytest.mark.parametrize("stream", [False, True])
async def test_stop_reasons_map_to_finish_reasons(scripted: str, ours: str, stream: bool) -> None:
    with anthropic_stack([text("partial", finish_reason=scripted)]) as (_, model):
        response = await model.request([Message.user_message("x")], ModelParams(stream=stream))
    assert response.finish_reason == ours
    assert response.truncated is (ours == "length")


# ---- tools --------------------------------------------------------------------------------


async def test_a_tool_round_trip_drives_a_tool_call_agent_to_finished() -> None:
    script = [
        tool_calls(call("create_chat_completion", {"response": "42"}), content="Answering."),
    ]
    with anthropic_stack(script) as (server, model):
        agent = ToolCallAgent(model=model)
        result = await agent.run("what is six times seven?")
    assert agent.state == AgentState.FINISHED, result
    assert result.final_answer == "42"
    (request,) = server.message_requests
    tools = {tool["name"]: tool for tool in request.body["tools"]}
    assert set(tools) == {"create_chat_completion", "terminate"}
    assert tools["terminate"]["input_schema"]["type"] == "object"
    assert request.body["tool_choice"] == {"type": "auto"}


async def test_several_calls_in_one_turn_are_answered_in_one_user_turn() -> None:
    script = [
        tool_calls(call("add", {"a": 1, "b": 2}), call("add", {"a": 3, "b": 4}), content="Both."),
        text("3 and 7"),
    ]
    with anthropic_stack(script) as (server, model):
        llm = facade(model)
        first = await llm.request([Message.user_message("add twice")], tools=[ADD.to_param()])
        calls = first.message.tool_calls
        assert calls and [c.function.name for c in calls] == ["add", "add"]
        assert json.loads(calls[1].function.arguments) == {"a": 3, "b": 4}
        history = [
            Message.user_message("add twice"),
            first.message,
            Message.tool_message("3", "add", calls[0].id),
            Message.tool_message("boom", "add", calls[1].id, is_error=True),
            Message.user_message("go on"),
        ]
        second = await llm.request(history, tools=[ADD.to_param()])
    assert second.message.content == "3 and 7"
    turns = server.message_requests[1].body["messages"]
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]
    assistant, results = turns[1]["content"], turns[2]["content"]
    assert [b["type"] for b in assistant] == ["text", "tool_use", "tool_use"]
    assert [b["type"] for b in results] == ["tool_result", "tool_result", "text"]
    assert results[0]["tool_use_id"] == calls[0].id and "is_error" not in results[0]
    assert results[1]["is_error"] is True and results[1]["content"][0]["text"] == "boom"


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        ("auto", {"type": "auto"}),
        ("required", {"type": "any"}),
        ("none", {"type": "none"}),
        ({"type": "function", "function": {"name": "add"}}, {"type": "tool", "name": "add"}),
    ],
)
async def test_tool_choice_maps_to_the_api(ours: object, theirs: dict) -> None:
    with anthropic_stack([text("ok")]) as (server, model):
        await model.request([Message.user_message("x")], ModelParams(tools=[ADD], tool_choice=ours))
    assert server.message_requests[0].body["tool_choice"] == theirs


async def test_unanswered_calls_get_a_stub_and_odd_ids_are_made_to_fit() -> None:
    """A history from another model (ids with dots and colons) or cut mid-step still makes a
    request the API accepts: every call answered, ids of the allowed characters."""
    history = [
        Message.user_message("go"),
        Message.from_tool_calls(
            [
                {"id": "functions.add:0", "function": {"name": "add", "arguments": "{}"}},
                {"id": "functions.add:1", "function": {"name": "add", "arguments": "not json"}},
            ]
        ),
        Message.tool_message("1", "add", "functions.add:0"),
    ]
    with anthropic_stack([text("fine")]) as (server, model):
        response = await model.request(history, ModelParams(tools=[ADD]))
    assert response.message.content == "fine"
    turns = server.message_requests[0].body["messages"]
    uses = [b for b in turns[1]["content"] if b["type"] == "tool_use"]
    assert [u["id"] for u in uses] == ["functions_add_0", "functions_add_1"]
    assert uses[1]["input"] == {"raw_arguments": "not json"}
    results = turns[2]["content"]
    assert [r["tool_use_id"] for r in results] == ["functions_add_0", "functions_add_1"]
    assert results[1]["is_error"] is True


# ---- images -------------------------------------------------------------------------------


async def test_images_go_as_base64_with_their_real_type_or_as_urls() -> None:
    message = Message.user_message("what is this?", base64_image=PNG)
    message.images = [
        ImagePart(url=f"data:image/png;base64,{JPEG}"),  # mislabelled: the bytes decide
        ImagePart(url="https://example.com/cat.webp"),
    ]
    with anthropic_stack([text("a picture")]) as (server, model):
        response = await model.request([message], ModelParams())
    assert response.message.content == "a picture"
    blocks = server.message_requests[0].body["messages"][0]["content"]
    assert blocks[0] == {"type": "text", "text": "what is this?"}
    assert blocks[1]["source"] == {"type": "base64", "media_type": "image/png", "data": PNG}
    assert blocks[2]["source"]["media_type"] == "image/jpeg"
    assert blocks[3]["source"] == {"type": "url", "url": "https://example.com/cat.webp"}


async def test_a_screenshot_of_a_tool_goes_inside_its_tool_result() -> None:
    history = [
        Message.user_message("look"),
        Message.from_tool_calls(
            [{"id": "toolu_1", "function": {"name": "shot", "arguments": "{}"}}]
        ),
        Message.tool_message("Screenshot taken", "shot", "toolu_1", base64_image=PNG),
    ]
    with anthropic_stack([text("seen")]) as (server, model):
        await model.request(history, ModelParams())
    result = server.message_requests[0].body["messages"][2]["content"][0]
    assert [part["type"] for part in result["content"]] == ["text", "image"]


# ---- errors -------------------------------------------------------------------------------


async def test_a_prompt_too_long_is_a_context_overflow_with_its_numbers() -> None:
    with anthropic_stack([text("never")], context_window=2000) as (server, model):
        with pytest.raises(ContextWindowExceededError) as caught:
            await facade(model).request([Message.user_message("word " * 3000)])
    assert caught.value.limit == 2000 and caught.value.tokens and caught.value.tokens > 2000
    assert "prompt is too long" in str(caught.value)
    assert len(server.message_requests) == 1  # not retried


async def test_prompt_and_max_tokens_over_the_window_names_the_room_left() -> None:
    with anthropic_stack([text("never")], context_window=5000) as (_, model):
        with pytest.raises(ContextWindowExceededError) as caught:
            await model.request([Message.user_message("word " * 2000)], ModelParams())
    assert caught.value.limit == 5000 - 4096 and caught.value.tokens


@pytest.mark.parametrize("status", [429, 529, 500])
async def test_transient_errors_are_retried_and_counted_at_the_server(status: int) -> None:
    headers = {"retry-after": "0"} if status == 429 else None
    script = [error(status, headers=headers), error(status, headers=headers), text("at last")]
    with anthropic_stack(script) as (server, model):
        response = await facade(model).request([Message.user_message("x")])
    assert response.message.content == "at last"
    assert len(server.message_requests) == 3


async def test_the_error_types_are_ours_at_the_edge() -> None:
    with anthropic_stack([error(429, headers={"retry-after": "7"}), error(529)]) as (_, model):
        with pytest.raises(LLMRateLimitError) as limited:
            await model.request([Message.user_message("x")], ModelParams())
        with pytest.raises(LLMServerError) as overloaded:
            await model.request([Message.user_message("x")], ModelParams(stream=True))
    assert limited.value.retry_after == 7.0 and limited.value.status_code == 429
    assert "rate_limit_error" in str(limited.value)
    assert overloaded.value.status_code == 529 and "overloaded_error" in str(overloaded.value)
    assert isinstance(limited.value.__cause__, Exception)  # raised from the SDK's error


async def test_an_error_event_mid_stream_is_retried() -> None:
    script = [stream_error(529, reply=text("half an answer here"), after=3), text("whole")]
    pieces: list[str] = []
    with anthropic_stack(script) as (server, model):
        response = await facade(model).request([Message.user_message("x")], on_delta=pieces.append)
    assert response.message.content == "whole" and len(server.message_requests) == 2
    assert "".join(pieces).endswith("whole")


async def test_a_bad_key_fails_at_once_and_never_shows_the_key() -> None:
    wrong = "sk-ant-api03-wrongwrongwrongwrongwrong"
    with anthropic_stack([text("never")], api_key="sk-ant-the-right-one-000000000") as (
        server,
        _,
    ):
        model = anthropic_model(server, api_key=wrong)
        with pytest.raises(LLMAuthenticationError) as caught:
            await facade(model).request([Message.user_message("x")])
    assert len(server.message_requests) == 1
    assert "invalid x-api-key" in str(caught.value) and wrong not in str(caught.value)


async def test_an_unknown_model_is_not_found_at_once() -> None:
    with anthropic_stack([text("never")], models={"claude-other"}) as (server, model):
        with pytest.raises(LLMNotFoundError):
            await facade(model).request([Message.user_message("x")])
    assert len(server.message_requests) == 1


async def test_other_refusals_are_bad_requests_not_retried() -> None:
    with anthropic_stack([error(400, "messages: something is off")]) as (server, model):
        with pytest.raises(LLMBadRequestError) as caught:
            await facade(model).request([Message.user_message("x")])
    assert "something is off" in str(caught.value) and len(server.message_requests) == 1


async def test_nothing_listening_is_an_endpoint_error() -> None:
    with ScriptedAnthropicServer() as server:
        settings = anthropic_settings(server)
    with pytest.raises(LLMEndpointError, match="Nothing listens"):
        await AnthropicModel(settings).request([Message.user_message("x")], ModelParams())


async def test_https_to_a_plain_http_server_is_a_final_tls_error_with_advice() -> None:
    with ScriptedAnthropicServer([text("never")]) as server:
        https = server.base_url.replace("http://", "https://")
        model = AnthropicModel(anthropic_settings(server, base_url=https))
        with pytest.raises(LLMEndpointError) as caught:
            await facade(model).request([Message.user_message("x")])
        await model.aclose()
        assert server.requests == []  # a TLS hello is no HTTP request: nothing reached the API
    assert str(caught.value).startswith(f"TLS with {https} failed")
    assert "http://, not https://" in str(caught.value)


async def test_a_missing_key_is_a_clear_error_without_a_request(monkeypatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    with anthropic_stack([text("never")]) as (server, _):
        model = anthropic_model(server, api_key="")
        with pytest.raises(LLMAuthenticationError, match="ANTHROPIC_API_KEY"):
            await model.request([Message.user_message("x")], ModelParams())
    assert server.requests == []


def test_thinking_budgets_the_api_refuses_are_config_errors() -> None:
    with ScriptedAnthropicServer() as server:
        with pytest.raises(ConfigError, match="at least 1024"):
            anthropic_model(server, thinking=100)
        with pytest.raises(ConfigError, match="smaller than max_tokens"):
            anthropic_model(server, thinking=4096, max_tokens=4096)


async def test_upstreams_base_url_with_v1_works() -> None:
    with anthropic_stack([text("ok")]) as (server, _):
        model = anthropic_model(server, base_url=server.base_url + "/v1/")
        response = await model.request([Message.user_message("x")], ModelParams())
    assert response.message.content == "ok"
    assert server.message_requests[0].path == "/v1/messages"


# ---- extended thinking --------------------------------------------------------------------


async def test_thinking_is_reasoning_not_answer_and_goes_back_unchanged() -> None:
    script = [
        tool_calls(call("add", {"a": 2, "b": 2}), thinking="I should add."),
        text("4", thinking="Done adding.", redacted_thinking="secret chain"),
    ]
    with anthropic_stack(script, thinking=2048, temperature=0.0) as (server, model):
        llm = facade(model)
        first = await llm.request([Message.user_message("2+2?")], tools=[ADD.to_param()])
        (block,) = first.message.thinking_blocks or []
        assert first.reasoning == "I should add." and first.message.content is None
        assert block.provider == "anthropic" and block.text == "I should add." and block.signature
        history = [
            Message.user_message("2+2?"),
            first.message,
            Message.tool_message("4", "add", first.message.tool_calls[0].id),
        ]
        second = await llm.request(history, tools=[ADD.to_param()], on_delta=lambda _: None)
    assert second.message.content == "4" and second.reasoning == "Done adding."
    kinds = [b.redacted for b in second.message.thinking_blocks or []]
    assert kinds == [False, True] and "secret" not in (second.message.thinking_blocks[1].data or "")
    body = server.message_requests[1].body
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert "temperature" not in body  # never sent: the API refuses sampling fields
    sent = body["messages"][1]["content"]
    assert sent[0] == {
        "type": "thinking",
        "thinking": "I should add.",
        "signature": block.signature,
    }
    assert sent[1]["type"] == "tool_use"


async def test_a_changed_thinking_block_is_refused_by_the_server() -> None:
    script = [tool_calls(call("add", {"a": 1, "b": 1}), thinking="Original thought.")]
    with anthropic_stack(script, thinking=2048) as (_, model):
        first = await model.request([Message.user_message("1+1")], ModelParams(tools=[ADD]))
        assert first.message.thinking_blocks
        first.message.thinking_blocks[0].text = "A thought I edited."
        history = [
            Message.user_message("1+1"),
            first.message,
            Message.tool_message("2", "add", first.message.tool_calls[0].id),
        ]
        with pytest.raises(LLMBadRequestError, match="Invalid `signature`"):
            await model.request(history, ModelParams(tools=[ADD]))
        forged = ThinkingBlock(provider="anthropic", data="Zm9yZ2Vk")
        first.message.thinking_blocks = [forged]
        with pytest.raises(LLMBadRequestError, match="redacted_thinking"):
            await model.request(history, ModelParams(tools=[ADD]))


async def test_a_tool_loop_without_its_thinking_is_sent_without_thinking() -> None:
    """A turn whose thinking was lost (another provider's, a history edited by hand) cannot be
    continued with thinking on (the server refuses that too): that request goes without."""
    history = [
        Message.user_message("1+1"),
        Message.from_tool_calls(
            [{"id": "toolu_9", "function": {"name": "add", "arguments": "{}"}}]
        ),
        Message.tool_message("2", "add", "toolu_9"),
    ]
    history[1].thinking_blocks = [ThinkingBlock(provider="bedrock", text="x", signature="y")]
    with anthropic_stack([text("2"), text("3")], thinking=2048) as (server, model):
        response = await model.request(history, ModelParams(tools=[ADD]))
        assert response.message.content == "2" and response.reasoning is None
        forced = await model.request(
            [Message.user_message("add")], ModelParams(tools=[ADD], tool_choice="required")
        )
    assert forced.message.content == "3"
    assert ["thinking" in r.body for r in server.message_requests] == [False, False]


async def test_a_session_resume_continues_a_thinking_tool_loop(tmp_path) -> None:
    """The thinking blocks of a step are stored with the session and sent back unchanged by
    the agent that resumes it (the server refuses a changed or missing one)."""
    script = [
        tool_calls(call("add", {"a": 20, "b": 22}), thinking="Let me add these."),
        error(400, "scripted failure of step 2"),
        tool_calls(call("terminate", {"status": "success"}), thinking="All done now."),
    ]
    add_tool = _add_tool()
    with anthropic_stack(script, thinking=2048) as (server, model):
        store = SessionStore.for_workspace(tmp_path)
        agent = ToolCallAgent(model=model, max_steps=5)
        agent.available_tools.add_tool(add_tool)
        recorder = store.start("agent", program="test")
        recorder.attach_agent(agent)
        await agent.run("add 20 and 22")
        await recorder.close()
        assert agent.state == AgentState.ERROR

        data = store.load(recorder.session_id)
        fresh = ToolCallAgent(model=anthropic_model(server, thinking=2048), max_steps=5)
        fresh.available_tools.add_tool(add_tool)
        data.restore_agent(fresh)
        kept = [m for m in fresh.memory.messages if m.thinking_blocks]
        assert kept and kept[0].thinking_blocks[0].text == "Let me add these."
        await fresh.resume()
    assert fresh.state == AgentState.FINISHED
    last = server.message_requests[-1].body["messages"]
    thinking = [b for t in last for b in t["content"] if b["type"] == "thinking"]
    assert (
        thinking[0]["thinking"] == "Let me add these."
        and "thinking" in server.message_requests[-1].body
    )


def _add_tool():
    from app.tool import tool

    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    return add


# ---- prompt caching -----------------------------------------------------------------------


async def test_breakpoints_never_exceed_four_and_sit_on_the_stable_prefix() -> None:
    history: list[Message] = [Message.system_message("sys " * 1000)]
    with anthropic_stack([], min_cacheable_tokens=1024) as (server, model):
        server.responder = lambda request: tool_calls(call("add", {"a": 1, "b": 1}))
        for step in range(6):
            history.append(Message.user_message(f"step {step}"))
            response = await model.request(history, ModelParams(tools=[ADD]))
            history.append(response.message)
            for tool_call in response.message.tool_calls or []:
                history.append(Message.tool_message("2", "add", tool_call.id))
    bodies = [r.body for r in server.message_requests]
    assert all(marks(body) <= 4 for body in bodies)
    assert marks(bodies[-1]) == 4
    assert "cache_control" in bodies[-1]["tools"][-1]
    assert "cache_control" in bodies[-1]["system"][-1]
    assert server.cache_uses[-1].read > 0


async def test_caching_off_marks_nothing() -> None:
    with anthropic_stack([text("ok")], prompt_cache=False) as (server, model):
        await model.request(
            [Message.system_message("s"), Message.user_message("x")], ModelParams(tools=[ADD])
        )
    assert marks(server.message_requests[0].body) == 0


async def test_a_20_step_manus_run_is_billed_mostly_at_the_cached_rate(tmp_path) -> None:
    """The acceptance run, in process: 20 steps of Manus on the scripted server read at
    least 80 % of their input tokens from the prompt cache, and cost far less for it."""
    steps = 20
    script = notes_script(steps)
    with anthropic_stack(script) as (server, model):
        agent = Manus(model=model, workspace=tmp_path, max_steps=steps)
        result = await agent.run("write twenty notes")
        await model.aclose()
    assert agent.state == AgentState.FINISHED, result
    assert len(server.message_requests) == steps and (tmp_path / "note_18.txt").exists()
    usage = result.usage
    assert usage.cached_tokens >= 0.8 * usage.prompt_tokens, usage
    assert all(marks(r.body) <= 4 for r in server.message_requests)
    price = ModelPrice(**PRICE)
    uncached = ModelPrice(input=PRICE["input"], output=PRICE["output"])
    assert cost_of(usage, price) < 0.5 * cost_of(usage, uncached)


# ---- lazy import --------------------------------------------------------------------------


@pytest.mark.e2e
def test_importing_manus_does_not_import_the_sdk() -> None:
    code = "import sys, app.agent.manus, app.llm.anthropic\nprint('anthropic' in sys.modules)\n"
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert proc.stdout.strip() == "False"


# ---- a hostile or broken server -----------------------------------------------------------


async def test_answers_that_are_no_json_are_retried_a_bounded_number_of_times() -> None:
    garbage = raw(200, "<html>not an answer</html>", content_type="application/json")
    with anthropic_stack([garbage] * 6) as (server, model):
        with pytest.raises(LLMResponseError, match="Unusable response"):
            await facade(model, max_retries=5).request([Message.user_message("x")])
    assert len(server.message_requests) == 3  # the first try and two more, not six


async def test_a_stream_that_ends_without_message_stop_is_malformed() -> None:
    start = {"type": "message_start", "message": {"usage": {"input_tokens": 1}}}
    half = raw(200, f"event: message_start\ndata: {json.dumps(start)}\n\n", "text/event-stream")
    with anthropic_stack([half]) as (_, model):
        with pytest.raises(LLMResponseError, match="before its message_stop"):
            await model.request([Message.user_message("x")], ModelParams(stream=True))


async def test_a_key_echoed_back_in_an_error_is_redacted() -> None:
    echo = error(400, f"The key {SCRIPTED_API_KEY} may not do that")
    with anthropic_stack([echo]) as (_, model):
        with pytest.raises(LLMBadRequestError) as caught:
            await model.request([Message.user_message("x")], ModelParams())
    assert SCRIPTED_API_KEY not in str(caught.value) and "***" in str(caught.value)


async def test_a_call_id_a_hostile_server_invents_still_pairs_on_the_next_turn() -> None:
    odd = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "../../etc/passwd:1", "name": "add", "input": {}}],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 5, "output_tokens": 5},
    }
    with anthropic_stack([raw(200, json.dumps(odd)), text("fine")]) as (server, model):
        first = await model.request([Message.user_message("x")], ModelParams(tools=[ADD]))
        call_id = first.message.tool_calls[0].id
        history = [
            Message.user_message("x"),
            first.message,
            Message.tool_message("2", "add", call_id),
        ]
        second = await model.request(history, ModelParams(tools=[ADD]))
    assert call_id == "../../etc/passwd:1" and second.message.content == "fine"
    turns = server.message_requests[1].body["messages"]
    assert (
        turns[1]["content"][0]["id"]
        == turns[2]["content"][0]["tool_use_id"]
        == "______etc_passwd_1"
    )


async def test_adaptive_thinking_for_the_newer_models() -> None:
    script = [tool_calls(call("add", {"a": 1, "b": 1}), thinking="Quick one."), text("2")]
    with anthropic_stack(script, thinking="adaptive") as (server, model):
        first = await model.request([Message.user_message("1+1")], ModelParams(tools=[ADD]))
        history = [
            Message.user_message("1+1"),
            first.message,
            Message.tool_message("2", "add", first.message.tool_calls[0].id),
        ]
        second = await model.request(history, ModelParams(tools=[ADD]))
    assert first.reasoning == "Quick one." and second.message.content == "2"
    assert [r.body["thinking"] for r in server.message_requests] == [{"type": "adaptive"}] * 2


def test_a_thinking_mode_that_is_no_budget_is_a_config_error() -> None:
    with ScriptedAnthropicServer() as server, pytest.raises(ConfigError, match="adaptive"):
        anthropic_model(server, thinking="lots")
