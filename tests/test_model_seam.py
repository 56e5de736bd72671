"""The model seam (``app.llm.Model``), ``@tool`` and ``TestModel``: what a library user writes."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import re
import threading
from pathlib import Path
from typing import Annotated, Literal

import pytest
from pydantic import Field

from app.agent.toolcall import ToolCallAgent
from app.config import LLMSettings
from app.exceptions import LLMServerError, LLMTransientError, ToolError
from app.flow.planning import PlanningFlow
from app.llm import LLM, Model, ModelParams, ModelResponse, ToolDefinition
from app.llm.endpoint_memory import EndpointMemories
from app.llm.openai.model import OpenAIChatModel
from app.llm.refusals import Refusals
from app.llm.stack import build_model
from app.llm.text_mode import TextToolCalls
from app.schema import AgentState, Message
from app.testing import TestModel, example_arguments
from app.tool import FunctionTool, Terminate, ToolCollection, tool

DOCS = Path(__file__).resolve().parent.parent / "docs"


def first_python_block(page: str, heading: str) -> str:
    text = (DOCS / page).read_text(encoding="utf-8")
    section = text[text.index(heading) :]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, f"no python block under {heading}"
    return match.group(1)


async def test_the_bring_your_own_model_class_is_a_model_as_documented() -> None:
    """The section's second block: a class with request(), run by an agent to FINISHED."""
    text = (DOCS / "llm.md").read_text(encoding="utf-8")
    section = text[text.index("## Bring your own model") :]
    code = re.findall(r"```python\n(.*?)```", section, re.S)[1]
    namespace: dict[str, object] = {}
    exec(compile(code, "docs/llm.md", "exec"), namespace)
    model = namespace["AdderModel"]()  # type: ignore[operator]
    assert isinstance(model, Model)
    agent = ToolCallAgent(model=model, available_tools=ToolCollection(add_numbers, Terminate()))
    await agent.run("What is 2 + 3?")
    assert agent.state == AgentState.FINISHED
    assert any(
        m.role == "tool" and m.content and m.content.endswith("5") for m in agent.memory.messages
    )


@tool(name="add")
def add_numbers(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def test_the_bring_your_own_model_script_runs_as_documented() -> None:
    """The first code block of docs/llm.md's section is complete: it runs to FINISHED."""
    code = first_python_block("llm.md", "## Bring your own model")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "docs/llm.md", "exec"), {"__name__": "__main__"})
    assert "status: success" in out.getvalue()


# ---- @tool ---------------------------------------------------------------------------------


@tool
async def forecast(
    city: str, unit: Literal["c", "f"] = "c", days: Annotated[int, Field(ge=1, le=7)] = 1
) -> str:
    """Weather for a city.

    Args:
        city: The city's name,
            e.g. Paris.
        unit: Celsius or Fahrenheit.
        days: How many days.

    Returns:
        A sentence.
    """
    if not city.strip():
        raise ToolError("city must not be empty")
    return f"{days} day(s) of sun in {city} ({unit})"


CALLS: list[tuple[str, int]] = []


@tool(name="count_words")
def words(text: str) -> int:
    """Count the words of a text."""
    CALLS.append((text, threading.get_ident()))
    return len(text.split())


def test_the_schema_is_derived_from_the_signature_and_docstring() -> None:
    assert isinstance(forecast, FunctionTool)
    assert forecast.name == "forecast"
    assert forecast.description == "Weather for a city."
    assert forecast.parameters == {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "city": {"type": "string", "description": "The city's name, e.g. Paris."},
            "unit": {
                "type": "string",
                "enum": ["c", "f"],
                "default": "c",
                "description": "Celsius or Fahrenheit.",
            },
            "days": {
                "type": "integer",
                "minimum": 1,
                "maximum": 7,
                "default": 1,
                "description": "How many days.",
            },
        },
        "required": ["city"],
    }
    assert words.name == "count_words" and words.description == "Count the words of a text."


async def test_arguments_are_validated_by_the_signature_before_the_call() -> None:
    tools = ToolCollection(forecast, words)
    ok = await tools.execute(name="forecast", tool_input={"city": "Oslo", "days": "3"})
    assert str(ok) == "3 day(s) of sun in Oslo (c)"
    bad = await tools.execute(
        name="forecast", tool_input={"city": "Oslo", "days": 9, "unit": "k", "extra": 1}
    )
    assert bad.failed
    message = bad.error or ""
    for field in ("days", "unit", "extra"):
        assert f"- {field}:" in message, message
    assert "it was not run" in message
    raised = await tools.execute(name="forecast", tool_input={"city": " "})
    assert raised.failed and raised.error == "city must not be empty"


async def test_a_sync_tool_runs_off_the_event_loop() -> None:
    CALLS.clear()
    result = await ToolCollection(words).execute(name="count_words", tool_input={"text": "a b"})
    assert str(result) == "2"
    assert CALLS and CALLS[0][1] != threading.get_ident()


def test_a_tool_needs_named_annotated_parameters() -> None:
    def untyped(city):  # type: ignore[no-untyped-def]
        return city

    def variadic(*cities: str) -> str:
        return ""

    with pytest.raises(TypeError, match="type annotation"):
        tool(untyped)
    with pytest.raises(TypeError, match="named parameters"):
        tool(variadic)


# ---- TestModel -----------------------------------------------------------------------------


def test_example_arguments_fit_the_schema() -> None:
    arguments = example_arguments(forecast.parameters or {})
    assert arguments == {"city": "a"}
    nested = {
        "type": "object",
        "properties": {
            "steps": {"type": "array", "items": {"type": "string"}, "minItems": 2},
            "mode": {"anyOf": [{"type": "null"}, {"enum": ["x", "y"]}]},
            "n": {"type": "number", "minimum": 2},
        },
        "required": ["steps", "mode", "n"],
    }
    assert example_arguments(nested) == {"steps": ["a", "a"], "mode": "x", "n": 2.0}


async def test_test_model_calls_every_tool_then_finishes() -> None:
    model = TestModel()
    agent = ToolCallAgent(
        name="probe", model=model, available_tools=ToolCollection(forecast, words, Terminate())
    )
    await agent.run("Try every tool.")
    assert agent.state == AgentState.FINISHED
    results = {m.name: m.content for m in agent.memory.messages if m.role == "tool"}
    assert "1 day(s) of sun in a (c)" in (results["forecast"] or "")
    assert "1" in (results["count_words"] or "")
    assert "terminate" in results
    first_messages, first_params = model.requests[0]
    assert [t.name for t in first_params.tools] == ["forecast", "count_words", "terminate"]
    assert first_messages[0].role == "system" or first_messages[0].role == "user"


async def test_test_model_answers_with_results_when_nothing_ends_the_run() -> None:
    llm = LLM.from_model(TestModel(call_tools=["count_words"]))
    reply = await llm.request(
        [Message.user_message("go")], tools=[words.to_param(), forecast.to_param()]
    )
    assert [c.function.name for c in reply.message.tool_calls or []] == ["count_words"]


# ---- LLM.from_model ------------------------------------------------------------------------


class Flaky:
    """Fails with a transient error ``failures`` times, then streams its answer."""

    name = "flaky"

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0

    async def request(self, messages: list[Message], params: ModelParams) -> ModelResponse:
        self.calls += 1
        if params.on_delta is not None:
            result = params.on_delta("Hel")
            if asyncio.iscoroutine(result):
                await result
        if self.calls <= self.failures:
            raise LLMServerError("overloaded", model=self.name)
        if params.on_delta is not None:
            result = params.on_delta("lo")
            if asyncio.iscoroutine(result):
                await result
        return ModelResponse(message=Message.assistant_message("Hello"))


async def test_transient_errors_of_a_model_are_retried_and_streams_not_repeated() -> None:
    model = Flaky(failures=2)
    llm = LLM.from_model(model, max_retries=3, retry_min_wait=0, retry_max_wait=0)
    pieces: list[str] = []
    reply = await llm.request([Message.user_message("hi")], on_delta=pieces.append)
    assert reply.message.content == "Hello" and model.calls == 3
    assert "".join(pieces) == "Hello"
    assert reply.usage.estimated and llm.usage.requests == 1


async def test_retries_run_out_with_the_count_in_the_error() -> None:
    llm = LLM.from_model(Flaky(failures=5), max_retries=1, retry_min_wait=0, retry_max_wait=0)
    with pytest.raises(LLMTransientError, match="gave up after 2 attempts"):
        await llm.request([Message.user_message("hi")])


async def test_a_model_that_does_not_stream_is_handed_over_whole() -> None:
    class Plain:
        name = "plain"

        async def request(self, messages: list[Message], params: ModelParams) -> ModelResponse:
            assert isinstance(messages[0], Message) and messages[0].role == "system"
            assert params.tools == (ToolDefinition.from_param(words.to_param()),)
            return ModelResponse(message=Message.assistant_message("all at once"))

    assert isinstance(Plain(), Model)
    pieces: list[str] = []
    llm = LLM.from_model(Plain())
    await llm.request(
        [{"role": "user", "content": "hi"}],
        system_msgs=[Message.system_message("be brief")],
        tools=[words.to_param()],
        on_delta=pieces.append,
    )
    assert pieces == ["all at once"]


def test_what_is_not_a_model_is_refused_clearly() -> None:
    with pytest.raises(TypeError, match="not a Model"):
        LLM.from_model(object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="either llm= or model="):
        ToolCallAgent(name="x", model=TestModel(), llm=LLM.from_model(TestModel()))


def test_flows_take_a_model_too() -> None:
    model = TestModel(final_text=json.dumps({"ok": True}))
    agent = ToolCallAgent(name="worker", model=TestModel())
    flow = PlanningFlow(agent, model=model)
    assert flow.llm is not None and flow.llm.custom_model is model


# ---- the stack: wrappers over a model, the capability memory passed in -------------------------


class Recorded:
    """A typed in-process model that answers with ``reply`` and keeps what it was asked."""

    name = "recorded"

    def __init__(self, reply: str) -> None:
        self.reply = reply
        self.asked: list[tuple[list[Message], ModelParams]] = []

    async def request(self, messages: list[Message], params: ModelParams) -> ModelResponse:
        self.asked.append((list(messages), params))
        return ModelResponse(message=Message.assistant_message(self.reply))


async def test_text_tool_calls_in_text_mode_describe_the_tools_and_parse_the_call() -> None:
    inner = Recorded('<tool_call>{"name": "count_words", "arguments": {"text": "a b"}}</tool_call>')
    model = TextToolCalls(inner, Refusals("", "recorded", None), mode="text")
    history = [
        Message.system_message("be brief"),
        Message.user_message("count"),
        Message.from_tool_calls(
            tool_calls=[{"id": "c1", "function": {"name": "count_words", "arguments": "{}"}}]
        ),
        Message.tool_message("2", name="count_words", tool_call_id="c1"),
    ]
    params = ModelParams(tools=(ToolDefinition.from_param(words.to_param()),))
    reply = await model.request(history, params)
    sent, sent_params = inner.asked[0]
    assert sent_params.tools == () and "count_words" in (sent[0].content or "")
    assert [m.role for m in sent] == ["system", "user", "assistant", "user"]
    assert "<tool_call>" in (sent[2].content or "") and "<tool_response" in (sent[3].content or "")
    assert reply.finish_reason == "tool_calls" and reply.message.tool_calls is not None
    assert reply.message.tool_calls[0].function.name == "count_words"
    assert history[2].tool_calls  # the caller's messages are not changed


async def test_a_call_quoted_in_a_native_reply_is_not_run_nor_remembered() -> None:
    inner = Recorded(
        'To call it you would send: {"name": "count_words", "arguments": {"text": "x"}}'
    )
    refusals = Refusals("", "recorded", None)
    model = TextToolCalls(inner, refusals, mode="auto")
    params = ModelParams(tools=(ToolDefinition.from_param(words.to_param()),))
    reply = await model.request([Message.user_message("how?")], params)
    assert reply.message.tool_calls is None and inner.asked[0][1].tools == params.tools
    assert refusals.features == frozenset() and not model.text_mode


async def test_the_capability_memory_is_the_one_passed_in(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("OPENMANUS_CACHE_DIR", str(tmp_path))
    memories = EndpointMemories()
    await Refusals("http://127.0.0.1:9/v1", "m", memories).refuse("tools", "said so")
    assert memories.at().refused("http://127.0.0.1:9/v1", "m") == {"tools"}
    assert memories.at() is not EndpointMemories().at()  # each owner has its own
    settings = LLMSettings(model="m", base_url="http://127.0.0.1:9/v1", api_key="sk-x")
    stack = build_model(settings, memories)
    assert isinstance(stack.model, TextToolCalls) and stack.refusals is stack.model.refusals
    endpoint = stack.wire
    assert isinstance(endpoint, OpenAIChatModel) and endpoint.refusals.memories is memories
    built = LLM.create(llm_config=settings).endpoint
    assert isinstance(built, OpenAIChatModel)
    assert built.refusals.memories is LLM.registry.memories


async def test_a_users_model_passes_the_gate_and_the_timer_at_every_attempt() -> None:
    """The rate gate, the in-flight bound and the timer wrap every model, not only endpoints."""
    from app.llm.context import llm_scope, request_timer
    from app.testing import FunctionModel

    calls = {"n": 0}

    def flaky(messages: list[Message], info: object) -> str:
        calls["n"] += 1
        if calls["n"] == 1:
            raise LLMServerError("busy", status_code=503)
        return "done"

    gated: list[int] = []
    timed: list[float] = []

    async def gate() -> None:
        gated.append(calls["n"])

    llm = LLM.from_model(FunctionModel(flaky), retry_min_wait=0, retry_max_wait=0)
    token = request_timer.set(timed.append)
    try:
        with llm_scope(gate=gate):
            assert await llm.ask([Message.user_message("hi")]) == "done"
    finally:
        request_timer.reset(token)
    assert gated == [0, 1] and len(timed) == 2
