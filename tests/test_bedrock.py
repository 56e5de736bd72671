"""``BedrockModel`` against the scripted Bedrock server over real HTTP: every request signed
with SigV4 and checked by the server (botocore recomputes it), the answers in Converse's
JSON and ConverseStream's binary event stream."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.agent.toolcall import ToolCallAgent
from app.exceptions import (
    ContextWindowExceededError,
    LLMAuthenticationError,
    LLMBadRequestError,
    LLMConnectionError,
    LLMNotFoundError,
    LLMRateLimitError,
    LLMServerError,
)
from app.llm import LLM, ModelParams, ToolDefinition
from app.llm.bedrock import BedrockModel
from app.schema import AgentState, ImagePart, Message, ThinkingBlock, ToolCall
from app.testing import call, cut, drop, error, raw, stall, text, tool_calls
from app.testing.bedrock_server import ScriptedBedrockServer
from app.testing.replies import stream_error
from app.tool import Terminate, ToolCollection, tool
from tests.bedrock_helpers import bedrock_on, scripted_bedrock, settings_for

ADD = ToolDefinition(
    "add",
    "Add two numbers.",
    {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}},
)
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 32).decode()
JPEG = base64.b64encode(b"\xff\xd8\xff\xe0" + b"\x00" * 32).decode()


@pytest.fixture
def bedrock(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[ScriptedBedrockServer]:
    with scripted_bedrock(monkeypatch, tmp_path) as server:
        yield server


def model_for(server: ScriptedBedrockServer, **overrides: object) -> BedrockModel:
    """The model, without cache points unless asked (the bodies below are compared whole)."""
    return BedrockModel.from_settings(settings_for(server, **{"prompt_cache": False, **overrides}))


def user(text_: str) -> Message:
    return Message.user_message(text_)


# --- text, streaming, what the request carries -------------------------------------------------


async def test_a_plain_answer_is_one_signed_converse_request(
    bedrock: ScriptedBedrockServer,
) -> None:
    bedrock.push(text("Hello from Bedrock", usage={"prompt_tokens": 12, "completion_tokens": 4}))
    model = model_for(bedrock)
    answer = await model.request([Message.system_message("Be brief."), user("Hi")], ModelParams())
    assert answer.message.content == "Hello from Bedrock"
    assert answer.finish_reason == "stop"
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (12, 4)
    (seen,) = bedrock.requests
    assert (seen.operation, seen.auth, seen.rejected) == ("converse", "sigv4", None)
    assert seen.path == "/model/us.anthropic.claude-3-7-sonnet-20250219-v1%3A0/converse"
    assert seen.system == [{"text": "Be brief."}]
    assert seen.messages == [{"role": "user", "content": [{"text": "Hi"}]}]
    # ModelParams left unset leave the model's own settings: no inferenceConfig at all.
    assert "inferenceConfig" not in seen.body and "toolConfig" not in seen.body
    await model.aclose()


async def test_max_tokens_temperature_and_stop_go_in_inference_config(
    bedrock: ScriptedBedrockServer,
) -> None:
    bedrock.push("ok")
    model = model_for(bedrock)
    params = ModelParams(max_tokens=77, temperature=0.2, extra={"stop": "END", "top_p": 0.9})
    await model.request([user("Hi")], params)
    assert bedrock.requests[0].inference == {
        "maxTokens": 77,
        "temperature": 0.2,
        "stopSequences": ["END"],
        "topP": 0.9,
    }


async def test_watched_text_streams_piece_by_piece(bedrock: ScriptedBedrockServer) -> None:
    bedrock.push(text("one two three four five"))
    pieces: list[str] = []
    answer = await model_for(bedrock).request([user("Count")], ModelParams(on_delta=pieces.append))
    assert len(pieces) > 1 and "".join(pieces) == "one two three four five"
    assert answer.message.content == "one two three four five"
    assert bedrock.requests[0].operation == "converse-stream"


async def test_an_async_delta_callback_is_awaited(bedrock: ScriptedBedrockServer) -> None:
    bedrock.push(text("a b c"))
    pieces: list[str] = []

    async def watch(piece: str) -> None:
        await asyncio.sleep(0)
        pieces.append(piece)

    await model_for(bedrock).request([user("x")], ModelParams(on_delta=watch))
    assert "".join(pieces) == "a b c"


async def test_a_plain_answer_reaches_a_watcher_in_one_piece(
    bedrock: ScriptedBedrockServer,
) -> None:
    bedrock.push(text("whole answer"))
    pieces: list[str] = []
    await model_for(bedrock).request([user("x")], ModelParams(on_delta=pieces.append, stream=False))
    assert pieces == ["whole answer"] and bedrock.requests[0].operation == "converse"


# --- tools -------------------------------------------------------------------------------------


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@pytest.mark.parametrize("stream", [False, True])
async def test_a_tool_round_trip_drives_an_agent_to_finished(
    bedrock: ScriptedBedrockServer, stream: bool
) -> None:
    bedrock.push(
        tool_calls(call("add", {"a": 2, "b": 3}), call("add", {"a": 4, "b": 5}), content="Adding."),
        tool_calls(call("terminate", {"status": "success"})),
    )
    agent = ToolCallAgent(
        name="adder",
        llm=LLM.create(llm_config=settings_for(bedrock, stream=stream)),
        available_tools=ToolCollection(add, Terminate()),
    )
    await agent.run("Add 2 and 3, and 4 and 5.")
    assert agent.state == AgentState.FINISHED
    results = [m.content for m in agent.memory.messages if m.role == "tool"]
    assert [r.splitlines()[-1] for r in results[:2] if r] == ["5", "9"]
    first, second = bedrock.requests
    assert [t["name"] for t in first.tools or []] == ["add", "terminate"]
    # The second request answers both calls, in one user turn, by their ids.
    uses = [b["toolUse"] for b in second.messages[-2]["content"] if "toolUse" in b]
    answers = [b["toolResult"] for b in second.messages[-1]["content"] if "toolResult" in b]
    assert [u["input"] for u in uses] == [{"a": 2, "b": 3}, {"a": 4, "b": 5}]
    assert [a["toolUseId"] for a in answers] == [u["toolUseId"] for u in uses]
    assert [a["content"][0]["text"][-1] for a in answers] == ["5", "9"]
    assert all(r.rejected is None for r in bedrock.requests)


async def test_an_agent_takes_the_model_itself(bedrock: ScriptedBedrockServer) -> None:
    """``ToolCallAgent(model=...)``: the model under upstream's facade, retries included."""
    bedrock.push(error(503), tool_calls(call("terminate", {"status": "success"}), content="Done."))
    agent = ToolCallAgent(
        name="direct", model=model_for(bedrock), available_tools=ToolCollection(Terminate())
    )
    agent.llm.configure(retry_min_wait=0.001, retry_max_wait=0.01)
    await agent.run("Finish.")
    assert agent.state == AgentState.FINISHED and len(bedrock.requests) == 2


async def test_tool_choice_maps_to_converse(bedrock: ScriptedBedrockServer) -> None:
    model = model_for(bedrock)
    named = {"type": "function", "function": {"name": "add"}}
    for choice in ("auto", "required", named):
        bedrock.push(tool_calls(call("add", {"a": 1, "b": 1})))
        await model.request([user("x")], ModelParams(tools=(ADD,), tool_choice=choice))
    choices = [r.tool_config.get("toolChoice") for r in bedrock.requests if r.tool_config]
    assert choices == [None, {"any": {}}, {"tool": {"name": "add"}}]


async def test_tool_choice_none_sends_no_tools_and_the_history_as_text(
    bedrock: ScriptedBedrockServer,
) -> None:
    """Converse has no "none" and refuses toolUse blocks without a toolConfig: the earlier
    calls and results go as text, and the server accepts the request."""
    bedrock.push("Summary.")
    history = [
        user("Add."),
        Message.from_tool_calls([ToolCall.function_call("add", {"a": 1, "b": 2}, id="t1")]),
        Message.tool_message("3", "add", "t1"),
    ]
    answer = await model_for(bedrock).request(
        history, ModelParams(tools=(ADD,), tool_choice="none")
    )
    assert answer.message.content == "Summary."
    (seen,) = bedrock.requests
    assert seen.rejected is None and seen.tool_config is None
    flat = json.dumps(seen.messages)
    assert (
        "toolUse" not in flat
        and "[Called add with arguments" in flat
        and "[Result of add: 3]" in flat
    )


async def test_an_unanswered_call_gets_a_placeholder_result(bedrock: ScriptedBedrockServer) -> None:
    bedrock.push("ok")
    history = [
        user("Add."),
        Message.from_tool_calls([ToolCall.function_call("add", {"a": 1}, id="t1")]),
        user("Never mind."),
    ]
    await model_for(bedrock).request(history, ModelParams(tools=(ADD,)))
    seen = bedrock.requests[0]
    assert seen.rejected is None
    blocks = seen.messages[-1]["content"]
    assert "toolResult" in blocks[0] and blocks[-1] == {"text": "Never mind."}


# --- images --------------------------------------------------------------------------------------


async def test_images_are_sent_inline_with_their_sniffed_format(
    bedrock: ScriptedBedrockServer,
) -> None:
    bedrock.push("I see two images.")
    message = Message(
        role="user",
        content="What is this?",
        base64_image=PNG,
        images=[
            ImagePart(url=f"data:image/png;base64,{JPEG}"),
            ImagePart(url="https://x.test/a.png"),
        ],
    )
    screenshot = Message.tool_message("page", "browser", "t1", base64_image=PNG)
    history = [
        user("Look."),
        Message.from_tool_calls([ToolCall.function_call("browser", {}, id="t1")]),
        screenshot,
        message,
    ]
    browser = ToolDefinition("browser", "", {"type": "object"})
    await model_for(bedrock).request(history, ModelParams(tools=(browser,)))
    seen = bedrock.requests[0]
    assert seen.rejected is None
    result, text_block, png, jpeg, note = seen.messages[-1]["content"]
    assert result["toolResult"]["content"][1]["image"]["format"] == "png"
    assert text_block == {"text": "What is this?"}
    # The label said PNG; the bytes are JPEG, and the bytes win.
    assert (png["image"]["format"], jpeg["image"]["format"]) == ("png", "jpeg")
    assert "https://x.test/a.png" in note["text"] and "not sent" in note["text"]


@pytest.mark.parametrize("bad", ["not base64 !!", base64.b64encode(b"plain text").decode()])
async def test_an_image_that_is_not_one_is_a_clear_error(
    bedrock: ScriptedBedrockServer, bad: str
) -> None:
    with pytest.raises(LLMBadRequestError, match="image"):
        await model_for(bedrock).request(
            [Message.user_message("x", base64_image=bad)], ModelParams()
        )
    assert bedrock.requests == []


# --- usage, stop reasons -------------------------------------------------------------------------


async def test_cache_reads_and_writes_are_reported(bedrock: ScriptedBedrockServer) -> None:
    body = {
        "output": {"message": {"role": "assistant", "content": [{"text": "cached"}]}},
        "stopReason": "end_turn",
        "usage": {
            "inputTokens": 10,
            "outputTokens": 5,
            "totalTokens": 2015,
            "cacheReadInputTokens": 1500,
            "cacheWriteInputTokens": 500,
        },
    }
    bedrock.push(raw(200, json.dumps(body)))
    usage = (await model_for(bedrock).request([user("x")], ModelParams())).usage
    assert (usage.prompt_tokens, usage.cached_tokens, usage.cache_write_tokens) == (2010, 1500, 500)
    assert (usage.completion_tokens, usage.total_tokens, usage.requests) == (5, 2015, 1)


async def test_prompt_caching_reads_the_prefix_the_previous_step_wrote(
    bedrock: ScriptedBedrockServer,
) -> None:
    model = model_for(bedrock, prompt_cache=True)
    system = Message.system_message("You are careful. " * 600)  # well over 1,024 tokens
    history = [system, user("Step one.")]
    bedrock.push("one", "two")
    first = await model.request(history, ModelParams(tools=(ADD,)))
    history += [first.message, user("Step two.")]
    second = await model.request(history, ModelParams(tools=(ADD,)))
    assert first.usage.cached_tokens == 0 and first.usage.cache_write_tokens > 2000
    assert second.usage.cached_tokens >= first.usage.cache_write_tokens
    points = json.dumps(bedrock.requests[1].body).count("cachePoint")
    assert points == 4  # tools, system, the last two user turns: the most Converse allows


async def test_prompt_caching_is_off_for_models_bedrock_does_not_cache_for(
    bedrock: ScriptedBedrockServer,
) -> None:
    bedrock.push("ok", "ok")
    for model in (
        model_for(bedrock, model="meta.llama3-8b-instruct-v1:0", prompt_cache=True),
        model_for(bedrock, prompt_cache=False),
    ):
        await model.request([Message.system_message("s"), user("x")], ModelParams())
    assert all("cachePoint" not in r.raw.decode() for r in bedrock.requests)


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    ("scripted", "ours"),
    [
        ("stop", "stop"),
        ("length", "length"),
        ("content_filter", "content_filter"),
        ("guardrail_intervened", "content_filter"),
        ("stop_sequence", "stop"),
        ("model_context_window_exceeded", "length"),
        ("something_new", "something_new"),
    ],
)
async def test_stop_reasons_are_ours(
    bedrock: ScriptedBedrockServer, stream: bool, scripted: str, ours: str
) -> None:
    bedrock.push(text("cut", finish_reason=scripted))
    answer = await model_for(bedrock).request([user("x")], ModelParams(stream=stream))
    assert answer.finish_reason == ours
    assert answer.truncated == (ours == "length")


async def test_tool_use_stops_as_tool_calls(bedrock: ScriptedBedrockServer) -> None:
    bedrock.push(tool_calls(call("add", {"a": 1, "b": 2})))
    answer = await model_for(bedrock).request([user("x")], ModelParams(tools=(ADD,), stream=True))
    assert answer.finish_reason == "tool_calls"
    (only,) = answer.message.tool_calls or []
    assert json.loads(only.function.arguments) == {"a": 1, "b": 2} and only.id.startswith(
        "tooluse_"
    )


# --- reasoning ------------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
async def test_reasoning_is_kept_apart_and_sent_back_unchanged(
    bedrock: ScriptedBedrockServer, stream: bool
) -> None:
    bedrock.push(
        tool_calls(call("add", {"a": 1, "b": 2}), thinking="I should add.", redacted_thinking="x"),
        text("3", thinking="Done."),
    )
    model = model_for(bedrock, thinking_budget=2048, max_tokens=8192)
    params = ModelParams(tools=(ADD,), temperature=0.5, stream=stream, tool_choice="required")
    first = await model.request([user("Add 1 and 2.")], params)
    assert first.reasoning == "I should add."
    plain, redacted = first.message.thinking_blocks or []
    assert (plain.provider, plain.text, redacted.redacted) == ("bedrock", "I should add.", True)
    assert plain.signature and redacted.data
    assert first.message.content is None  # the reasoning is not the answer
    (use,) = first.message.tool_calls or []
    history = [user("Add 1 and 2."), first.message, Message.tool_message("3", "add", use.id)]
    second = await model.request(history, params)
    assert second.message.content == "3" and second.reasoning == "Done."
    sent = bedrock.requests[1]
    assert sent.rejected is None
    # Thinking takes the model's temperature, and lets it choose its tools.
    assert "temperature" not in sent.inference and "toolChoice" not in (sent.tool_config or {})
    assert sent.body["additionalModelRequestFields"]["thinking"]["budget_tokens"] == 2048


async def test_reasoning_changed_on_its_way_back_is_refused(bedrock: ScriptedBedrockServer) -> None:
    bedrock.push(tool_calls(call("add", {"a": 1, "b": 2}), thinking="Plan A."))
    model = model_for(bedrock, thinking_budget=2048, max_tokens=8192)
    first = await model.request([user("Add.")], ModelParams(tools=(ADD,)))
    (use,) = first.message.tool_calls or []
    forged = first.message.model_copy(
        update={
            "thinking_blocks": [
                ThinkingBlock(
                    provider="bedrock",
                    text="Plan B.",
                    signature=(first.message.thinking_blocks or [])[0].signature,
                )
            ]
        }
    )
    with pytest.raises(LLMBadRequestError, match="signature"):
        await model.request(
            [user("Add."), forged, Message.tool_message("3", "add", use.id)],
            ModelParams(tools=(ADD,)),
        )
    dropped = first.message.model_copy(update={"thinking_blocks": None})
    with pytest.raises(LLMBadRequestError, match="reasoning"):
        await model.request(
            [user("Add."), dropped, Message.tool_message("3", "add", use.id)],
            ModelParams(tools=(ADD,)),
        )
    # Another provider's blocks are not sent to Bedrock at all.
    other = first.message.model_copy(
        update={"thinking_blocks": [ThinkingBlock(provider="anthropic", text="x", signature="s")]}
    )
    bedrock.push("fine")
    no_thinking = model_for(bedrock)
    await no_thinking.request(
        [user("Add."), other, Message.tool_message("3", "add", use.id)], ModelParams(tools=(ADD,))
    )
    assert "reasoningContent" not in bedrock.requests[-1].raw.decode()


# --- errors and retries ---------------------------------------------------------------------------


async def test_throttling_is_retried_through_the_stack(bedrock: ScriptedBedrockServer) -> None:
    bedrock.push(error(429), error(503), error(500, code="ModelNotReadyException"), "finally")
    llm = LLM.create(llm_config=settings_for(bedrock))
    assert await llm.ask([user("x")], stream=False) == "finally"
    assert len(bedrock.requests) == 4


async def test_throttling_through_from_model_is_retried_too(bedrock: ScriptedBedrockServer) -> None:
    bedrock.push(error(429), "ok")
    llm = LLM.from_model(
        model_for(bedrock), max_retries=2, retry_min_wait=0.001, retry_max_wait=0.01
    )
    assert await llm.ask([user("x")], stream=False) == "ok"
    assert len(bedrock.requests) == 2


async def test_the_model_itself_makes_one_attempt(bedrock: ScriptedBedrockServer) -> None:
    bedrock.push(error(429, "Too many requests, please wait before trying again."))
    with pytest.raises(LLMRateLimitError, match="ThrottlingException"):
        await model_for(bedrock).request([user("x")], ModelParams())
    assert len(bedrock.requests) == 1


@pytest.mark.parametrize(
    "failure",
    [
        drop(),
        cut(text("a b c d e f"), after=3),
        stall(text("a b c d e f"), after=2, seconds=30),
        stream_error(error(503), reply=text("a b c d"), after=3),
    ],
    ids=["drop", "cut", "stall", "exception-frame"],
)
async def test_broken_answers_are_transient_and_retried(
    bedrock: ScriptedBedrockServer, failure: object
) -> None:
    bedrock.push(failure, text("a b c d e f"))  # type: ignore[arg-type]
    pieces: list[str] = []
    llm = LLM.create(llm_config=settings_for(bedrock, timeout=1.0))
    answer = await llm.ask([user("x")], stream=True, on_delta=pieces.append)
    assert answer == "a b c d e f" and "".join(pieces) == "a b c d e f"  # no text twice
    assert len(bedrock.requests) == 2


async def test_an_exception_frame_mid_stream_is_our_error(bedrock: ScriptedBedrockServer) -> None:
    bedrock.push(stream_error(error(429), reply=text("a b c"), after=2))
    with pytest.raises(LLMRateLimitError, match="ThrottlingException"):
        await model_for(bedrock).request([user("x")], ModelParams(stream=True))


@pytest.mark.parametrize(
    ("reply", "kind", "words"),
    [
        (error(403), LLMAuthenticationError, "bedrock:InvokeModel"),
        (error(401), LLMAuthenticationError, "AWS credentials"),
        (
            error(
                400,
                "The security token included in the request is expired",
                code="ExpiredTokenException",
            ),
            LLMAuthenticationError,
            "ExpiredTokenException",
        ),
        (error(404, "Could not resolve the foundation model"), LLMNotFoundError, "model id"),
        (error(400, "The provided model identifier is invalid."), LLMNotFoundError, "model id"),
        (
            error(400, "Input is too long for requested model."),
            ContextWindowExceededError,
            "context window",
        ),
        (error(400, "Malformed input request"), LLMBadRequestError, "Malformed"),
        (
            error(
                400, "Your request exceeds the service quota", code="ServiceQuotaExceededException"
            ),
            Exception,
            "Quota",
        ),
    ],
)
async def test_final_errors_are_not_retried(
    bedrock: ScriptedBedrockServer, reply: object, kind: type[Exception], words: str
) -> None:
    bedrock.push(reply, "never")  # type: ignore[arg-type]
    llm = LLM.create(llm_config=settings_for(bedrock))
    with pytest.raises(kind, match=words) as caught:
        await llm.ask([user("x")], stream=False)
    assert not isinstance(caught.value, LLMServerError | LLMConnectionError | LLMRateLimitError)
    assert len(bedrock.requests) == 1 and bedrock.remaining == 1


async def test_an_overflow_says_its_numbers(bedrock: ScriptedBedrockServer) -> None:
    bedrock.push(error(400, "prompt is too long: 210000 tokens > 200000 maximum"))
    with pytest.raises(ContextWindowExceededError) as caught:
        await model_for(bedrock).request([user("x")], ModelParams())
    assert (caught.value.tokens, caught.value.limit) == (210000, 200000)


async def test_a_request_over_the_context_limit_is_an_overflow(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with ScriptedBedrockServer(["never"], context_limit=100) as server:
        model = bedrock_on(server, monkeypatch, tmp_path)
        with pytest.raises(ContextWindowExceededError, match="Input is too long"):
            await model.request([user("word " * 1000)], ModelParams())
        assert server.remaining == 1 and server.requests[0].rejected == "ValidationException"


async def test_a_wrong_secret_is_refused_at_once(
    bedrock: ScriptedBedrockServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret-0123456789abcdefghijkl")
    bedrock.push("never")
    llm = LLM.create(llm_config=settings_for(bedrock))
    with pytest.raises(LLMAuthenticationError, match="InvalidSignatureException"):
        await llm.ask([user("x")], stream=False)
    assert [r.rejected for r in bedrock.requests] == ["InvalidSignatureException"]


async def test_nothing_listening_is_a_final_endpoint_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    server = ScriptedBedrockServer().start()
    model = bedrock_on(server, monkeypatch, tmp_path)
    server.stop()
    from app.exceptions import LLMEndpointError

    with pytest.raises(LLMEndpointError, match="connection refused"):
        await LLM.from_model(model, max_retries=3).ask([user("x")], stream=False)


# --- cancellation ---------------------------------------------------------------------------------


async def test_cancelling_mid_stream_returns_at_once_and_leaves_no_thread(
    bedrock: ScriptedBedrockServer,
) -> None:
    bedrock.push("warm", stall(text("one two three four"), after=3, seconds=60))
    model = model_for(bedrock)
    await model.request([user("warm up")], ModelParams())  # imports, credentials: resolved
    before = {t.ident for t in threading.enumerate()}
    first_piece = asyncio.Event()
    task = asyncio.create_task(
        model.request([user("x")], ModelParams(on_delta=lambda piece: first_piece.set()))
    )
    await asyncio.wait_for(first_piece.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
    assert {t.ident for t in threading.enumerate() if t.is_alive()} <= before
    # The server sees the connection closed: Bedrock would stop generating.
    assert await asyncio.to_thread(bedrock.wait_for_disconnects, 1, 10)
    await model.aclose()


# --- redaction ------------------------------------------------------------------------------------


async def test_the_secret_key_and_session_token_never_reach_messages(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    token = "IQoJb3JpZ2luX2VjEXAMPLESESSIONTOKEN0123456789"
    with ScriptedBedrockServer(session_token=token) as server:
        model = bedrock_on(server, monkeypatch, tmp_path)
        echo = f"Bad request: key {server.secret_key} token {token}"
        server.push("ok", error(400, echo))
        await model.request([user("x")], ModelParams())
        with pytest.raises(LLMBadRequestError) as caught:
            await model.request([user("x")], ModelParams())
    assert server.secret_key not in str(caught.value) and token not in str(caught.value)
    from app.logger import redact

    assert server.secret_key not in redact(f"secret={server.secret_key}") and token not in redact(
        token
    )


# --- a hostile endpoint -----------------------------------------------------------------------


async def test_a_hostile_endpoints_answers_are_contained(bedrock: ScriptedBedrockServer) -> None:
    from app.exceptions import LLMResponseError
    from app.testing.bedrock_server import event_frame, frame

    def stream(*frames: bytes) -> object:
        return raw(200, b"".join(frames), content_type="application/vnd.amazon.eventstream")

    start = event_frame("messageStart", {"role": "assistant"})
    stop = event_frame("messageStop", {"stopReason": "tool_use"})
    use = {"toolUse": {"toolUseId": "tooluse_x", "name": "add"}}
    bedrock.push(
        raw(500, b"x" * 5_000_000),  # an error body with no sensible end
        stream(  # broken arguments, an event nobody knows: kept as sent, ignored
            start,
            event_frame("contentBlockStart", {"start": use, "contentBlockIndex": 0}),
            event_frame(
                "contentBlockDelta",
                {"delta": {"toolUse": {"input": '{"a": '}}, "contentBlockIndex": 0},
            ),
            event_frame("somethingNew", {"x": 1}),
            stop,
        ),
        stream(
            start,
            frame([(":event-type", "contentBlockDelta"), (":message-type", "event")], b"{not json"),
        ),
    )
    model = model_for(bedrock)
    with pytest.raises(LLMServerError) as caught:
        await model.request([user("x")], ModelParams())
    assert len(str(caught.value)) < 1000
    answer = await model.request([user("x")], ModelParams(tools=(ADD,), stream=True))
    (broken,) = answer.message.tool_calls or []
    assert (broken.function.name, broken.function.arguments) == ("add", '{"a": ')
    with pytest.raises(LLMResponseError, match="not JSON"):
        await model.request([user("x")], ModelParams(stream=True))
