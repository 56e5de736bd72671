"""The conformance suite: what every ``Model`` does under the one seam (docs/architecture.md).

Each case is a model behind ``LLM`` with the stack every model gets (retries, rate gate,
recording): the three wire models against their scripted servers over real HTTP (OpenAI chat
completions, Anthropic's Messages API through its SDK, Bedrock's Converse signed with SigV4),
``FunctionModel``, a user's in-process class, and ``TestModel``. A scripted case answers the
same ``app.testing.replies`` script whatever its wire format; a retry is counted by the
requests the model received. Adding a model is one entry in ``CASES``.
"""

from __future__ import annotations

import base64
import json
import struct
import zlib
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest

from app.agent.toolcall import ToolCallAgent
from app.exceptions import (
    ContextWindowExceededError,
    LLMAuthenticationError,
    LLMBadRequestError,
    LLMError,
    LLMRateLimitError,
    LLMServerError,
    LLMTransientError,
)
from app.llm import LLM, ModelParams, ModelResponse
from app.llm.usage import Usage
from app.schema import AgentState, Message, ToolCall
from app.testing import FunctionInfo, FunctionModel, ScriptedLLMServer, TestModel
from app.testing.anthropic_server import ScriptedAnthropicServer
from app.testing.replies import (
    ErrorReply,
    Reply,
    TextReply,
    ToolCallsReply,
    call,
    error,
    text,
    tool_calls,
)
from app.tool import Terminate, ToolCollection, tool
from tests.anthropic_helpers import anthropic_settings
from tests.bedrock_helpers import scripted_bedrock, settings_for
from tests.conftest import llm_settings


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two numbers."""
    return a * b


def _png(width: int = 2, height: int = 2) -> str:
    """A real PNG (red pixels), base64: the APIs check an image's bytes against its type."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    png = b"\x89PNG\r\n\x1a\n" + chunk(
        b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    )
    png += chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")
    return base64.b64encode(png).decode("ascii")


PNG = _png()
#: A request large enough that an overflow naming a few thousand tokens is believable.
LONG_TASK = "Summarise these notes. " + "The quarterly figures rose again in the north. " * 500
FAST = {"max_retries": 3, "retry_min_wait": 0.001, "retry_max_wait": 0.01}


# ---- the cases ---------------------------------------------------------------------------------


@dataclass
class Harness:
    """A model behind ``llm``, answering a script: ``received()`` counts the requests it
    got, ``bodies()`` gives each as text (the wire body, or our messages as JSON)."""

    llm: LLM
    received: Callable[[], int]
    bodies: Callable[[], list[str]]


#: Opens a harness answering a script; everything it starts is closed with the ExitStack.
Opener = Callable[[ExitStack, pytest.MonkeyPatch, Path, list[Reply]], Harness]


@dataclass(frozen=True)
class Case:
    """One model under the suite. ``overflow``: how its API says a request is too long;
    ``scripted``: it answers a script (``TestModel`` answers on its own); ``streams``: it
    hands text over in pieces."""

    id: str
    open: Opener
    overflow: Reply
    scripted: bool = True
    streams: bool = True


def _openai(stack: ExitStack, _mp: pytest.MonkeyPatch, _home: Path, script: list[Reply]) -> Harness:
    server = stack.enter_context(ScriptedLLMServer(script))
    chats = lambda: [r for r in server.requests if r.route == "chat"]  # noqa: E731
    return Harness(
        LLM.create(llm_config=llm_settings(server)),
        lambda: len(chats()),
        lambda: [r.raw.decode("utf-8") for r in chats()],
    )


def _anthropic(
    stack: ExitStack, _mp: pytest.MonkeyPatch, _home: Path, script: list[Reply]
) -> Harness:
    server = stack.enter_context(ScriptedAnthropicServer(script))
    return Harness(
        LLM.create(llm_config=anthropic_settings(server)),
        lambda: len(server.message_requests),
        lambda: [r.raw.decode("utf-8") for r in server.message_requests],
    )


def _bedrock(stack: ExitStack, mp: pytest.MonkeyPatch, home: Path, script: list[Reply]) -> Harness:
    server = stack.enter_context(scripted_bedrock(mp, home, script=script))
    sent = lambda: [r for r in server.requests if r.operation]  # noqa: E731
    return Harness(
        LLM.create(llm_config=settings_for(server)),
        lambda: len(sent()),
        lambda: [r.raw.decode("utf-8") for r in sent()],
    )


def play(reply: Reply) -> ModelResponse:
    """A scripted reply as an in-process model gives it: a response, or our error."""
    if isinstance(reply, TextReply):
        message = Message.assistant_message(reply.content)
    elif isinstance(reply, ToolCallsReply):
        calls = [ToolCall.function_call(c.name, c.arguments_text, id=c.id) for c in reply.calls]
        message = Message(role="assistant", content=reply.content, tool_calls=calls)
    elif isinstance(reply, ErrorReply):
        raise _error(reply)
    else:
        raise AssertionError(f"no in-process form for {reply!r}")
    usage = reply.usage
    given = (
        Usage(**usage.to_json(), requests=1)
        if usage is not None and usage is not False
        else Usage()
    )
    return ModelResponse(message=message, usage=given, finish_reason=reply.finish_reason)


def _error(reply: ErrorReply) -> LLMError:
    status, text_ = reply.status, reply.message
    if status == 429:
        return LLMRateLimitError(text_, status_code=status)
    if status >= 500:
        return LLMServerError(text_, status_code=status)
    if status in (401, 403):
        return LLMAuthenticationError(text_, status_code=status)
    if "context length" in text_ or "too long" in text_:
        return ContextWindowExceededError(text_, status_code=status)
    return LLMBadRequestError(text_, status_code=status)


def _dumps(messages: Sequence[Message]) -> str:
    return json.dumps([m.to_dict() for m in messages])


def _function(
    _stack: ExitStack, _mp: pytest.MonkeyPatch, _home: Path, script: list[Reply]
) -> Harness:
    replies = iter(script)
    model = FunctionModel(lambda messages, info: play(next(replies)), name="function")
    return Harness(
        LLM.from_model(model, supports_images=True, **FAST),
        lambda: len(model.requests),
        lambda: [_dumps(messages) for messages, _ in model.requests],
    )


class ScriptedUserModel:
    """A user's own model, as docs/llm.md shows one: a class with ``request()`` (it plays a
    script, streaming its text in two pieces)."""

    name = "user-model"

    def __init__(self, script: list[Reply]) -> None:
        self.script = iter(script)
        self.asked: list[list[Message]] = []

    async def request(self, messages: Sequence[Message], params: ModelParams) -> ModelResponse:
        self.asked.append(list(messages))
        response = play(next(self.script))
        content = response.message.content
        if params.on_delta is not None and content:
            half = len(content) // 2
            for piece in (content[:half], content[half:]):
                outcome = params.on_delta(piece)
                if outcome is not None:
                    await outcome
        return response


def _user(_stack: ExitStack, _mp: pytest.MonkeyPatch, _home: Path, script: list[Reply]) -> Harness:
    model = ScriptedUserModel(script)
    return Harness(
        LLM.from_model(model, supports_images=True, **FAST),
        lambda: len(model.asked),
        lambda: [_dumps(messages) for messages in model.asked],
    )


def _test_model(
    _stack: ExitStack, _mp: pytest.MonkeyPatch, _home: Path, _script: list[Reply]
) -> Harness:
    model = TestModel()
    return Harness(
        LLM.from_model(model, supports_images=True),
        lambda: len(model.requests),
        lambda: [_dumps(messages) for messages, _ in model.requests],
    )


OPENAI_OVERFLOW = error(
    400,
    "This model's maximum context length is 4096 tokens. Please reduce the length of the messages.",
    code="context_length_exceeded",
)
CASES = [
    Case("openai", _openai, OPENAI_OVERFLOW),
    Case("anthropic", _anthropic, error(400, "prompt is too long: 5100 tokens > 4096 maximum")),
    Case("bedrock", _bedrock, error(400, "Input is too long for requested model.")),
    Case("function", _function, OPENAI_OVERFLOW),
    Case("user", _user, OPENAI_OVERFLOW),
    Case("test-model", _test_model, OPENAI_OVERFLOW, scripted=False, streams=False),
]
SCRIPTED = [case for case in CASES if case.scripted]


def _ids(case: Case) -> str:
    return case.id


@pytest.fixture
async def start(
    case: Case, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> AsyncIterator[Callable[..., Harness]]:
    """Opens ``case``'s model on a script; its LLMs and servers are closed after the test."""
    opened: list[Harness] = []
    with ExitStack() as stack:

        def open_(*script: Reply) -> Harness:
            harness = case.open(stack, monkeypatch, tmp_path, list(script))
            opened.append(harness)
            return harness

        yield open_
        for harness in opened:
            await harness.llm.aclose()


def _agent(harness: Harness) -> ToolCallAgent:
    tools = ToolCollection(add, multiply, Terminate())
    return ToolCallAgent(llm=harness.llm, available_tools=tools, max_steps=5)


def _answered(agent: ToolCallAgent) -> Iterator[tuple[ToolCall, Message]]:
    """Each call the model made with the tool message that answered it."""
    results = {m.tool_call_id: m for m in agent.memory.messages if m.role == "tool"}
    for message in agent.memory.messages:
        for made in message.tool_calls or ():
            assert made.id in results, f"call {made.id} ({made.function.name}) unanswered"
            yield made, results[made.id]


# ---- the suite ---------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=_ids)
async def test_a_tool_call_round_trip_drives_the_agent_to_finished(case, start):
    harness = start(
        tool_calls(call("add", {"a": 2, "b": 3}), content="Adding."),
        tool_calls(call("terminate", {"status": "success"})),
    )
    agent = _agent(harness)
    result = await agent.run("What is 2 + 3?")
    assert agent.state == AgentState.FINISHED and result.ok, result
    answered = dict((made.function.name, result.content) for made, result in _answered(agent))
    assert "add" in answered and "terminate" in answered
    if case.scripted:
        assert answered["add"] is not None and answered["add"].endswith("\n5")
        assert harness.received() == 2
        # The result went back to the model on the next turn.
        assert json.dumps(answered["add"])[1:-1] in harness.bodies()[1]


@pytest.mark.parametrize("case", CASES, ids=_ids)
async def test_several_calls_in_one_turn(case, start):
    harness = start(
        tool_calls(call("add", {"a": 1, "b": 2}), call("multiply", {"a": 3, "b": 4})),
        tool_calls(call("terminate", {"status": "success"})),
    )
    agent = _agent(harness)
    await agent.run("Add 1 and 2, and multiply 3 by 4, at once.")
    assert agent.state == AgentState.FINISHED
    first = next(m for m in agent.memory.messages if m.tool_calls)
    names = [c.function.name for c in first.tool_calls or ()]
    assert sorted(names) == ["add", "multiply"]
    results = {made.function.name: result.content or "" for made, result in _answered(agent)}
    if case.scripted:
        assert results["add"].endswith("\n3") and results["multiply"].endswith("\n12")
        second = harness.bodies()[1]
        assert all(json.dumps(results[n])[1:-1] in second for n in ("add", "multiply"))


@pytest.mark.parametrize("case", CASES, ids=_ids)
async def test_streamed_deltas(case, start):
    harness = start(text("The answer is five, as promised."))
    pieces: list[str] = []
    response = await harness.llm.request([Message.user_message("2 + 3?")], on_delta=pieces.append)
    assert "".join(pieces) == response.message.content and pieces
    if case.scripted:
        assert response.message.content == "The answer is five, as promised."
    if case.streams:
        assert len(pieces) > 1


@pytest.mark.parametrize("case", CASES, ids=_ids)
async def test_an_image_reaches_the_model(case, start):
    harness = start(text("A red square."), text("Red again."))
    answer = await harness.llm.ask_with_images([Message.user_message("What is this?")], [PNG])
    assert answer
    shot = Message.user_message("And this screenshot?", base64_image=PNG)
    await harness.llm.ask([shot])
    bodies = harness.bodies()
    assert len(bodies) == 2 and all(PNG in body for body in bodies)


@pytest.mark.parametrize("case", SCRIPTED, ids=_ids)
async def test_usage_as_the_model_reports_it(case, start):
    counts = {"prompt_tokens": 123, "completion_tokens": 7, "total_tokens": 130}
    harness = start(text("ok", usage=counts))
    response = await harness.llm.request([Message.user_message("hi")])
    usage = response.usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (123, 7, 130)
    assert not usage.estimated and usage.requests == 1
    assert harness.llm.usage.prompt_tokens == 123 and harness.llm.usage.requests == 1


@pytest.mark.parametrize("case", SCRIPTED, ids=_ids)
@pytest.mark.parametrize("reason", ["stop", "length", "tool_calls"])
async def test_the_stop_reasons(case, start, reason):
    if reason == "tool_calls":
        reply: Reply = tool_calls(call("add", {"a": 1, "b": 1}))
    else:
        reply = text(
            "The answer, whole" if reason == "stop" else "The answer, cut", finish_reason=reason
        )
    harness = start(reply)
    response = await harness.llm.request([Message.user_message("go")], tools=[add.to_param()])
    assert response.finish_reason == reason
    assert response.truncated == (reason == "length")
    assert bool(response.message.tool_calls) == (reason == "tool_calls")


@pytest.mark.parametrize("case", SCRIPTED, ids=_ids)
async def test_a_context_overflow(case, start):
    harness = start(case.overflow, text("never sent"))
    with pytest.raises(ContextWindowExceededError):
        await harness.llm.request([Message.user_message(LONG_TASK)])
    assert harness.received() == 1  # not retried


@pytest.mark.parametrize("case", SCRIPTED, ids=_ids)
async def test_a_transient_error_is_retried(case, start):
    harness = start(error(503), text("recovered"))
    assert await harness.llm.ask([Message.user_message("hi")]) == "recovered"
    assert harness.received() == 2


@pytest.mark.parametrize("case", SCRIPTED, ids=_ids)
async def test_a_fatal_error_is_not_retried(case, start):
    harness = start(error(403), text("never sent"))
    with pytest.raises(LLMError) as caught:
        await harness.llm.ask([Message.user_message("hi")])
    assert not isinstance(caught.value, LLMTransientError)
    assert harness.received() == 1


def test_every_case_is_a_distinct_model():
    assert len({case.id for case in CASES}) == len(CASES)
    assert {"openai", "anthropic", "bedrock", "function", "user", "test-model"} <= {
        case.id for case in CASES
    }


def test_the_script_player_is_the_models_contract():
    """What the in-process cases raise for each scripted failure."""
    assert isinstance(_error(error(429)), LLMRateLimitError)
    assert isinstance(_error(error(503)), LLMTransientError)
    assert isinstance(_error(OPENAI_OVERFLOW), ContextWindowExceededError)
    assert not isinstance(_error(error(403)), LLMTransientError)
    made = play(tool_calls(call("add", {"a": 1, "b": 2}, id="c1")))
    assert made.message.tool_calls == [ToolCall.function_call("add", '{"a": 1, "b": 2}', id="c1")]
    assert isinstance(FunctionInfo, type)
