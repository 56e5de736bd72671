"""What a ``ToolCallAgent`` subclass sees: a narrow surface (think, act, execute_tool and the
special-tool hooks), tool collections of its own, settings read when it is made, and
``run()`` returning a ``RunResult`` that is still upstream's string."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from app.agent.result import RunResult
from app.agent.toolcall import ToolCallAgent
from app.config import AppConfig, LimitsSettings, LLMSettings, config
from app.schema import AgentState, Message, ToolCall
from app.testing import FunctionModel, TestModel
from app.testing.function_model import FunctionInfo
from app.tool import BaseTool, Terminate, ToolCollection

#: ToolCallAgent's own public names: what a subclass uses or overrides. A new one is a
#: decision about the surface: add it here and to docs/agents.md ("Writing an agent").
SURFACE = {
    "step",
    "think",
    "act",
    "execute_tool",
    "run",
    "cleanup",
    "final_answer",
    "add_note",
    "last_usage",
    "compactor",
    "compaction_request",
    "run_tool",  # deprecated: execute_tool
    "model_post_init",  # pydantic's hook
}


class Counter(BaseTool):
    """A tool with state of its own: the calls it saw."""

    name: str = "count"
    description: str = "Counts."
    parameters: dict[str, Any] | None = {"type": "object", "properties": {}}
    seen: list[int] = []

    async def execute(self) -> str:
        self.seen.append(len(self.seen) + 1)
        return f"call {len(self.seen)}"


class Upstreamish(ToolCallAgent):
    """Written the way upstream's agents are: the tools as a class default."""

    name: str = "upstreamish"
    available_tools: ToolCollection = ToolCollection(Counter(), Terminate())


def test_the_public_surface_is_what_a_subclass_needs() -> None:
    own = {
        name
        for name, value in vars(ToolCallAgent).items()
        if not name.startswith("_") and (callable(value) or isinstance(value, property))
    }
    assert own == SURFACE
    # upstream's hooks keep their names and signatures
    for hook in ("_handle_special_tool", "_is_special_tool", "_should_finish_execution"):
        assert hook in vars(ToolCallAgent)
    assert list(inspect.signature(ToolCallAgent.execute_tool).parameters) == ["self", "command"]


def counting(messages: list[Message], info: FunctionInfo) -> Any:
    if any(m.role == "tool" for m in messages):
        return "counted"
    return ToolCall.function_call("count", {})


async def test_a_class_default_collection_is_copied_for_each_instance() -> None:
    declared = Upstreamish.model_fields["available_tools"].default
    first = Upstreamish(model=FunctionModel(counting))
    second = Upstreamish(model=FunctionModel(counting))
    assert first.available_tools is not second.available_tools
    assert first.available_tools is not declared and second.available_tools is not declared
    one, two = first.available_tools.get_tool("count"), second.available_tools.get_tool("count")
    assert isinstance(one, Counter) and isinstance(two, Counter) and one is not two
    assert "available_tools" not in first.model_fields_set  # still the class's default

    result = await first.run("count once")
    assert result.final_answer == "counted"
    assert one.seen == [1] and two.seen == []  # the tool's state stayed with its agent
    assert isinstance(declared.get_tool("count"), Counter)
    assert declared.get_tool("count").seen == []  # type: ignore[union-attr]
    # A collection passed in is the caller's: used as given.
    mine = ToolCollection(Counter(), Terminate())
    assert Upstreamish(model=TestModel(), available_tools=mine).available_tools is mine


def test_a_class_default_that_cannot_be_copied_is_a_clear_error() -> None:
    import threading

    class Locked(Counter):
        lock: Any = None

    class Unshareable(ToolCallAgent):
        available_tools: ToolCollection = ToolCollection(Locked(lock=threading.Lock()))

    with pytest.raises(TypeError, match=r"default_factory=lambda: ToolCollection"):
        Unshareable(model=TestModel())


async def test_settings_come_from_the_config_when_the_agent_is_made() -> None:
    """``[limits]`` is read once, when the agent is made; a config changed afterwards does
    not reach a run already set up (a field set in code always wins)."""
    calls = [ToolCall.function_call("count", {}) for _ in range(3)]

    def three_calls(messages: list[Message], info: FunctionInfo) -> Any:
        return "done" if any(m.role == "tool" for m in messages) else calls

    settings = LLMSettings(model="m", api_key="k")
    config.use(
        AppConfig(llm={"default": settings}, limits=LimitsSettings(max_tool_calls_per_reply=1))
    )
    try:
        agent = ToolCallAgent(
            model=FunctionModel(three_calls), available_tools=ToolCollection(Counter(seen=[]))
        )
        config.use(AppConfig(llm={"default": settings}))  # the default: 16
        await agent.run("count")
    finally:
        config.reset()
    answers = [m for m in agent.memory.messages if m.role == "tool"]
    assert [m.is_error for m in answers] == [False, True, True]  # one ran, two "not run"
    assert "at most 1 run per reply" in (answers[1].content or "")


class Shouting(ToolCallAgent):
    """Upstream's way of changing one call: override ``execute_tool``, return a string."""

    async def execute_tool(self, command: ToolCall) -> str:  # type: ignore[override]
        return (await super().execute_tool(command)).upper()


async def test_an_upstream_style_override_of_execute_tool_is_used() -> None:
    agent = Shouting(model=FunctionModel(counting), available_tools=ToolCollection(Counter()))
    result = await agent.run("count")
    (answer,) = [m for m in agent.memory.messages if m.role == "tool"]
    assert answer.content == "OBSERVED OUTPUT OF CMD `COUNT` EXECUTED:\nCALL 1"
    assert result.ok


async def test_run_returns_a_run_result_that_is_upstreams_string() -> None:
    agent = ToolCallAgent(model=FunctionModel(lambda messages, info: "Paris."))
    result = await agent.run("Capital of France?")
    assert isinstance(result, RunResult) and isinstance(result, str)
    assert result == "Step 1: Paris." and result.startswith("Step 1")  # upstream's log
    assert f"{result}" == "Step 1: Paris." and result.final_answer == "Paris."
    assert result.state == AgentState.FINISHED and result.ok


async def test_run_tool_is_a_deprecated_name_for_execute_tool() -> None:
    agent = ToolCallAgent(model=TestModel(), available_tools=ToolCollection(Counter(seen=[])))
    with pytest.warns(DeprecationWarning, match="execute_tool"):
        outcome = await agent.run_tool(ToolCall.function_call("count", {}))
    assert outcome == "Observed output of cmd `count` executed:\ncall 1" and not outcome.failed
