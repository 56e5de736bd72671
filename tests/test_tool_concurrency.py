"""Concurrent tool calls: read-only calls of one message overlap, everything else runs in
order, and results land in memory in the model's order. Overlap is observed with events
(each call waits until all its batch-mates have started), never with timing."""

from __future__ import annotations

import asyncio
import types
from collections.abc import Generator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from app.agent.toolcall import ToolCallAgent
from app.schema import Function, ToolCall
from app.testing import call, tool_calls
from app.tool.base import BaseTool, ToolResult
from app.tool.bash import Bash
from app.tool.concurrency import call_is_concurrency_safe, plan_batches
from app.tool.create_chat_completion import CreateChatCompletion
from app.tool.python_execute import PythonExecute
from app.tool.str_replace_editor import StrReplaceEditor
from app.tool.terminate import Terminate
from app.tool.tool_collection import ToolCollection

WAIT = 5.0  # a generous bound: reached only when the behaviour is broken


@types.coroutine
def _yield_once() -> Generator[None, None, None]:
    """Give the event loop one turn (what ``sleep(0)`` does, without a sleep)."""
    yield


class Recorder:
    """Shared log of what the tools did, plus a rendezvous for calls that must overlap."""

    def __init__(self, expected_together: int) -> None:
        self.log: list[str] = []
        self.active = 0
        self.max_active = 0
        self.expected = expected_together
        self.arrived = 0
        self.all_arrived = asyncio.Event()
        self.finished: dict[str, asyncio.Event] = {}

    def done(self, label: str) -> asyncio.Event:
        return self.finished.setdefault(label, asyncio.Event())


class Look(BaseTool):
    """A read-only tool: waits until ``expected`` looks have started (so they must overlap),
    optionally until another look has finished (to finish out of order)."""

    name: str = "look"
    description: str = "Look at something."
    parameters: dict[str, Any] | None = {
        "type": "object",
        "properties": {"label": {"type": "string"}, "after": {"type": "string"}},
        "required": ["label"],
    }
    concurrency_safe: bool = True
    recorder: Any = None

    async def execute(self, label: str, after: str | None = None) -> ToolResult:
        rec: Recorder = self.recorder
        rec.log.append(f"start {label}")
        rec.active += 1
        rec.max_active = max(rec.max_active, rec.active)
        rec.arrived += 1
        if rec.arrived >= rec.expected:
            rec.all_arrived.set()
        try:
            await asyncio.wait_for(rec.all_arrived.wait(), WAIT)
            if after:
                await asyncio.wait_for(rec.done(after).wait(), WAIT)
        finally:
            rec.active -= 1
            rec.log.append(f"end {label}")
            rec.done(label).set()
        return ToolResult(output=f"saw {label}", base64_image=f"img-{label}")


class Write(BaseTool):
    """A tool with side effects: must run alone."""

    name: str = "write"
    description: str = "Write something."
    parameters: dict[str, Any] | None = {
        "type": "object",
        "properties": {"label": {"type": "string"}},
        "required": ["label"],
    }
    recorder: Any = None
    seen_active: ClassVar[list[int]] = []

    async def execute(self, label: str) -> str:
        rec: Recorder = self.recorder
        rec.log.append(f"start {label}")
        self.seen_active.append(rec.active)
        await _yield_once()  # anything wrongly running alongside gets to run here
        rec.log.append(f"end {label}")
        return f"wrote {label}"


def _agent(llm: Any, rec: Recorder, **kwargs: Any) -> ToolCallAgent:
    tools = ToolCollection(Look(recorder=rec), Write(recorder=rec), Terminate())
    return ToolCallAgent(llm=llm, available_tools=tools, max_steps=3, **kwargs)


async def test_read_only_calls_overlap_and_results_keep_the_models_order(llm_server, make_llm):
    rec = Recorder(expected_together=3)
    llm_server.push(
        tool_calls(
            # "a" finishes last: it waits for "c", which is listed after it.
            call("look", {"label": "a", "after": "c"}),
            call("look", {"label": "b"}),
            call("look", {"label": "c"}),
        ),
        tool_calls(call("terminate", {"status": "success"})),
    )
    agent = _agent(make_llm(), rec)
    result = await agent.run("look around")

    assert result.ok
    assert rec.max_active == 3  # all three were running at the same time
    assert rec.log.index("end c") < rec.log.index("end a")  # finished out of order...
    tool_msgs = [m for m in agent.memory.messages if m.role == "tool"][:3]
    # ...but recorded in the model's order, each with its own image.
    assert [m.content.splitlines()[-1] for m in tool_msgs] == ["saw a", "saw b", "saw c"]
    assert [m.base64_image for m in tool_msgs] == ["img-a", "img-b", "img-c"]
    calls = next(m for m in agent.memory.messages if m.role == "assistant").tool_calls
    assert [m.tool_call_id for m in tool_msgs] == [c.id for c in calls]


async def test_a_write_between_reads_is_a_barrier(llm_server, make_llm):
    rec = Recorder(expected_together=2)
    Write.seen_active.clear()
    llm_server.push(
        tool_calls(
            call("look", {"label": "r1"}),
            call("look", {"label": "r2"}),
            call("write", {"label": "w"}),
            call("look", {"label": "r3"}),
            call("look", {"label": "r4"}),
        ),
        tool_calls(call("terminate", {"status": "success"})),
    )
    agent = _agent(make_llm(), rec)
    assert (await agent.run("go")).ok

    log = rec.log
    assert max(log.index("end r1"), log.index("end r2")) < log.index("start w")
    assert log.index("end w") < min(log.index("start r3"), log.index("start r4"))
    assert Write.seen_active == [0]  # nothing else was running during the write
    assert rec.max_active == 2  # r1/r2 overlapped, and r3/r4 (the second rendezvous)
    contents = [m.content.splitlines()[-1] for m in agent.memory.messages if m.role == "tool"]
    assert contents[:5] == ["saw r1", "saw r2", "wrote w", "saw r3", "saw r4"]


async def test_switched_off_every_call_runs_alone(llm_server, make_llm):
    rec = Recorder(expected_together=1)  # each look proceeds on its own
    llm_server.push(
        tool_calls(call("look", {"label": "x"}), call("look", {"label": "y"})),
        tool_calls(call("terminate", {"status": "success"})),
    )
    agent = _agent(make_llm(), rec, concurrent_tool_calls=False)
    assert (await agent.run("go")).ok
    assert rec.log[:4] == ["start x", "end x", "start y", "end y"]
    assert rec.max_active == 1


async def test_terminate_runs_after_the_reads_before_it(llm_server, make_llm):
    rec = Recorder(expected_together=2)
    llm_server.push(
        tool_calls(
            call("look", {"label": "p"}),
            call("look", {"label": "q"}),
            call("terminate", {"status": "success"}),
        ),
    )
    agent = _agent(make_llm(), rec)
    result = await agent.run("go")
    assert result.ok and result.steps == 1
    assert rec.max_active == 2
    names = [m.name for m in agent.memory.messages if m.role == "tool"]
    assert names == ["look", "look", "terminate"]


def _call(name: str, arguments: str) -> ToolCall:
    return ToolCall(
        id=f"id-{name}-{len(arguments)}", function=Function(name=name, arguments=arguments)
    )


def test_built_in_defaults(tmp_path: Path):
    editor = StrReplaceEditor(workspace=tmp_path)
    tools = ToolCollection(editor, Bash(), PythonExecute(), Terminate(), CreateChatCompletion())
    safe = {
        "view": _call("str_replace_editor", '{"command": "view", "path": "a"}'),
        "create": _call("str_replace_editor", '{"command": "create", "path": "a"}'),
        "bash": _call("bash", '{"command": "ls"}'),
        "python": _call("python_execute", '{"code": "1"}'),
        "terminate": _call("terminate", '{"status": "success"}'),
        "answer": _call("create_chat_completion", '{"response": "x"}'),
        "unknown": _call("nope", "{}"),
        "malformed": _call("str_replace_editor", '{"command": "view"'),
    }
    verdicts = {k: call_is_concurrency_safe(c, tools, ["terminate"]) for k, c in safe.items()}
    assert verdicts == {
        "view": True,
        "create": False,
        "bash": False,
        "python": False,
        "terminate": False,
        "answer": True,
        "unknown": False,
        "malformed": False,
    }


def test_plan_batches_groups_consecutive_safe_calls(tmp_path: Path):
    tools = ToolCollection(StrReplaceEditor(workspace=tmp_path), Terminate())
    view = '{"command": "view", "path": "f"}'
    calls = [
        _call("str_replace_editor", view),
        _call("str_replace_editor", view + " "),
        _call("str_replace_editor", '{"command": "create", "path": "f", "file_text": ""}'),
        _call("str_replace_editor", view),
        _call("terminate", '{"status": "success"}'),
    ]
    batches = plan_batches(calls, tools, ["terminate"])
    assert [len(b) for b in batches] == [2, 1, 1, 1]
    assert [c for b in batches for c in b] == calls  # order kept


def test_a_raising_safety_check_means_unsafe():
    class Moody(BaseTool):
        name: str = "moody"
        description: str = "Cannot decide."

        def is_concurrency_safe(self, arguments: dict[str, Any]) -> bool:
            raise RuntimeError("no idea")

        async def execute(self) -> str:
            return ""

    tools = ToolCollection(Moody())
    assert not call_is_concurrency_safe(_call("moody", "{}"), tools)


async def test_editor_views_do_not_wait_for_each_other(tmp_path: Path):
    (tmp_path / "f.txt").write_text("one\ntwo\n")
    editor = StrReplaceEditor(workspace=tmp_path)
    outputs = await asyncio.gather(
        *(editor.execute(command="view", path="f.txt") for _ in range(3))
    )
    assert all("two" in str(out) for out in outputs)


@pytest.mark.parametrize("command", ["create", "str_replace", "insert", "undo_edit"])
def test_editor_edits_are_not_concurrency_safe(command: str):
    assert not StrReplaceEditor().is_concurrency_safe({"command": command})
