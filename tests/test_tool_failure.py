"""One way to fail, checked in one place: a failed call of an answer tool or of ``terminate``
does not end the run; what the model reads for a failure says it once."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from app.agent.outcome import observe
from app.agent.result import StopReason
from app.agent.toolcall import ToolCallAgent
from app.exceptions import ToolError
from app.schema import AgentState, Message, ToolCall
from app.testing import FunctionModel, TestModel
from app.testing.function_model import FunctionInfo
from app.tool import BaseTool, Terminate, ToolCollection, ToolFailure, ToolResult, tool
from app.tool.base import result_failed
from app.web.agui import parse_run_input

ANSWERS = ["not ready yet", "42"]


@tool
def give_answer(value: str) -> ToolResult:
    """Hands in the final answer; refuses the first one (a documented way to fail)."""
    if value == ANSWERS[0]:
        return ToolResult(output=f"cannot accept {value!r}: check the figures", is_error=True)
    return ToolResult(output=value)


def answering(messages: list[Message], info: FunctionInfo) -> ToolCall:
    """Calls the answer tool: the refused value first, the right one after the refusal."""
    tried = sum(1 for m in messages if m.role == "tool")
    return ToolCall.function_call("give_answer", {"value": ANSWERS[min(tried, 1)]})


def tool_messages(model: FunctionModel, request: int) -> list[Message]:
    return [m for m in model.requests[request][0] if m.role == "tool"]


async def test_a_failed_answer_tool_does_not_end_the_run() -> None:
    """Issue 36: a tool in ``answer_tool_names`` that returned ``ToolResult(is_error=True)``
    ended the run as completed with the error text as its answer."""
    model = FunctionModel(answering)
    agent = ToolCallAgent(
        model=model,
        available_tools=ToolCollection(give_answer, Terminate()),
        answer_tool_names=["give_answer"],
        max_steps=4,
    )
    result = await agent.run("What is the answer?")

    assert result.stop_reason is StopReason.COMPLETED and result.state == AgentState.FINISHED
    assert result.final_answer == "42" and result.steps == 2
    assert len(model.requests) == 2  # the model saw the refusal and tried again
    (refusal,) = tool_messages(model, 1)
    assert refusal.is_error
    assert refusal.content == "Error: cannot accept 'not ready yet': check the figures"


async def test_an_answer_tool_that_always_fails_never_completes_the_run() -> None:
    """A hostile or stubborn model handing in a refused answer again and again: the run ends
    at its step budget, never as completed, and the refusal is never the answer."""

    def stubborn(messages: list[Message], info: FunctionInfo) -> ToolCall:
        return ToolCall.function_call("give_answer", {"value": ANSWERS[0]})

    agent = ToolCallAgent(
        model=FunctionModel(stubborn),
        available_tools=ToolCollection(give_answer, Terminate()),
        answer_tool_names=["give_answer"],
        max_steps=3,
        max_stuck_hints=5,
    )
    result = await agent.run("What is the answer?")
    assert result.stop_reason is StopReason.MAX_STEPS and not result.ok
    assert result.final_answer is None or "cannot accept" not in result.final_answer
    assert [m.is_error for m in agent.memory.messages if m.role == "tool"] == [True] * 3


async def test_a_failed_terminate_does_not_end_the_run() -> None:
    def ending(messages: list[Message], info: FunctionInfo) -> Any:
        if not any(m.role == "tool" for m in messages):
            return ToolCall.function_call("terminate", {"status": "finished"})  # not allowed
        return ToolCall.function_call("terminate", {"status": "success"})

    model = FunctionModel(ending)
    agent = ToolCallAgent(model=model, available_tools=ToolCollection(Terminate()), max_steps=4)
    result = await agent.run("Stop.")

    assert result.ok and result.steps == 2
    (refusal,) = tool_messages(model, 1)
    assert refusal.is_error
    assert refusal.content.startswith("Error: Invalid arguments for tool 'terminate'")
    assert "Observed output" not in refusal.content


# ---- every way to fail, normalized at one edge ------------------------------------------------


class Raw(BaseTool):
    """Returns what it is given, as a tool might."""

    name: str = "raw"
    description: str = "Returns a value."
    parameters: dict[str, Any] | None = {"type": "object", "properties": {}}
    value: Any = None

    async def execute(self) -> Any:
        if isinstance(self.value, Exception):
            raise self.value
        return self.value


@pytest.mark.parametrize(
    ("value", "failed", "reads"),
    [
        ("fine", False, "Observed output of cmd `raw` executed:\nfine"),
        ({"observation": "1", "success": True}, False, "Observed output of cmd `raw` executed:\n{"),
        (ToolResult(output="done"), False, "Observed output of cmd `raw` executed:\ndone"),
        (None, False, "Cmd `raw` completed with no output"),
        (ToolError("no such city"), True, "Error: no such city"),
        (ToolFailure(error="upstream says no"), True, "Error: upstream says no"),
        (ToolResult(error="error field"), True, "Error: error field"),
        (ToolResult(output="half done", is_error=True), True, "Error: half done"),
        ({"observation": "[exit code: 3]", "success": False}, True, "Error: {"),
        (KeyError("unlucky"), True, "Error: Tool 'raw' failed: KeyError: 'unlucky'"),
        (ToolError("Error: said twice"), True, "Error: said twice"),
    ],
    ids=lambda v: type(v).__name__,
)
async def test_every_way_to_fail_comes_back_as_one_flagged_result(
    value: Any, failed: bool, reads: str
) -> None:
    """``ToolCollection.execute`` always returns a ``ToolResult`` whose flag is right, and
    the model reads a failure once, as ``Error: ...``."""
    tools = ToolCollection(Raw(value=value))
    result = await tools.execute(name="raw", tool_input={})
    assert isinstance(result, ToolResult)
    assert result.is_error is failed and result_failed(result) is failed
    call = ToolCall.function_call("raw", {})
    agent = ToolCallAgent(model=TestModel(), available_tools=tools)
    outcome = await agent.execute_tool(call)
    assert outcome.failed is failed and outcome.startswith(reads), outcome
    assert "Error: Error" not in outcome and not (failed and "Observed output" in outcome)


async def test_refused_calls_say_what_happened_once() -> None:
    tools = ToolCollection(Raw(value="x"))
    agent = ToolCallAgent(model=TestModel(), available_tools=tools)
    unknown = await agent.execute_tool(ToolCall.function_call("fly", {}))
    assert unknown.failed and unknown == "Error: Unknown tool 'fly'. Available tools: raw."
    invalid = await agent.execute_tool(ToolCall.function_call("raw", {"speed": 3}))
    assert invalid.failed and invalid.startswith(
        "Error: Invalid arguments for tool 'raw' (it was not run); fix all of these"
    )
    garbled = ToolCall.model_validate({"id": "c", "function": {"name": "raw", "arguments": "{"}})
    unreadable = await agent.execute_tool(garbled)
    assert unreadable.failed and unreadable.startswith(
        "Error: Could not parse the arguments of tool 'raw'"
    )
    assert all(o.count("Error") == 1 for o in (unknown, invalid, unreadable))


def test_a_front_end_tool_error_is_a_failure() -> None:
    """An AG-UI client's tool message with ``error`` reaches the model as a failed call."""
    run = parse_run_input(
        {
            "threadId": "t",
            "runId": "r",
            "messages": [
                {"id": "m1", "role": "tool", "toolCallId": "c1", "content": "", "error": "denied"},
                {"id": "m2", "role": "tool", "toolCallId": "c2", "content": "42"},
            ],
        }
    )
    denied, answered = run.tool_results["c1"], run.tool_results["c2"]
    assert result_failed(denied) and observe("ask", denied, True) == "Error: denied"
    assert not result_failed(answered) and answered.output == "42"


# ---- one check, used everywhere a decision is made --------------------------------------------

ROOT = Path(__file__).resolve().parent.parent

#: Every place in app/ that reads whether a tool call failed, and why it may. A new ad-hoc
#: check (``isinstance(x, ToolFailure)``, ``x.is_error``, ``["success"]``, ``.error`` as a
#: condition, an ``Error:`` prefix) fails this test: decide with ``result_failed`` instead,
#: or list the site here with the reason it is not a decision.
ALLOWED: dict[tuple[str, str, str], str] = {
    # the one check, the edge that applies it, and the property that asks it
    ("app/tool/base.py", "result_failed", "isinstance Failure"): "the one check",
    ("app/tool/base.py", "result_failed", ".is_error"): "the one check",
    ("app/tool/base.py", "result_failed", "success key"): "the one check",
    ("app/tool/base.py", "as_tool_result", "result_failed()"): "the edge sets the flag",
    ("app/tool/base.py", "as_tool_result", ".is_error"): "the edge sets the flag",
    ("app/tool/base.py", "ToolResult.failed", "result_failed()"): "asks the one check",
    # decisions, through the one check
    ("app/agent/toolcall.py", "ToolCallAgent.execute_tool", "result_failed()"): "answer tools",
    ("app/agent/toolcall.py", "ToolCallAgent._handle_special_tool", "result_failed()"): "end",
    ("app/agent/browser.py", "BrowserContextHelper.get_browser_state", "result_failed()"): "",
    ("app/flow/planning.py", "PlanningFlow._ask_planner", "result_failed()"): "a usable plan",
    ("app/mcp/server.py", "_to_call_result", "result_failed()"): "MCP's isError",
    # not decisions: text, the flag already decided, or someone else's result type
    ("app/tool/base.py", "ToolResult.__add__", ".is_error"): "combines two flags",
    ("app/tool/base.py", "ToolResult.__str__", ".error as a test"): "which text",
    ("app/agent/outcome.py", "observe", ".error as a test"): "which text the model reads",
    ("app/tool/bash.py", "Bash.execute", ".error as a test"): "which text a notice goes to",
    ("app/tool/browser/actions.py", "BrowserActions._tool", ".error as a test"): (
        "browser-use's ActionResult at the SDK edge, raised as ToolError"
    ),
    ("app/agent/compaction.py", "shorten_long_parts", ".is_error"): "keeps a message's flag",
    ("app/schema.py", "Message.to_dict", ".is_error"): "stores a message's flag",
    ("app/tracing.py", "RunTracer._tool_result", ".error as a test"): "the event's flag",
}
#: Not scanned: the model layer sends a tool message's recorded flag on the wire and never
#: sees a tool result; the upstream compatibility layer is adapters onto the core.
SKIPPED = ("app/llm/", "app/compat/")


def failure_checks(tree: ast.Module) -> list[tuple[str, str]]:
    """(enclosing function, kind) of each place in ``tree`` that reads a failure."""
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    conditions: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If | ast.While | ast.IfExp | ast.Assert):
            conditions.add(id(node.test))
        elif isinstance(node, ast.BoolOp):
            conditions.update(id(v) for v in node.values)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            conditions.add(id(node.operand))
    found: list[tuple[str, str]] = []

    def kind(node: ast.AST) -> str | None:
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            first = node.args[0] if node.args else None
            text = first.value if isinstance(first, ast.Constant) else None
            if name == "isinstance" and len(node.args) == 2:
                if any(n.endswith("Failure") for n in _names(node.args[1])):
                    return "isinstance Failure"
            if name == "result_failed":
                return "result_failed()"
            if name in ("startswith", "removeprefix") and isinstance(text, str):
                return "Error prefix" if text.lower().startswith("error") else None
            if name == "get" and text == "success":
                return "success key"
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            return "success key" if node.slice.value == "success" else None
        if isinstance(node, ast.Attribute) and id(node) not in called:
            if node.attr == "is_error" and isinstance(node.ctx, ast.Load):
                return ".is_error"
            if node.attr == "error" and id(node) in conditions:
                return ".error as a test"
        return None

    def visit(node: ast.AST, scope: list[str]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                visit(child, [*scope, child.name])
                continue
            found_kind = kind(child)
            if found_kind is not None:
                found.append((".".join(scope) or "<module>", found_kind))
            visit(child, scope)

    visit(tree, [])
    return found


def _names(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Tuple):
        return [n for e in node.elts for n in _names(e)]
    if isinstance(node, ast.BinOp):
        return _names(node.left) + _names(node.right)
    if isinstance(node, ast.Name):
        return [node.id]
    return [node.attr] if isinstance(node, ast.Attribute) else []


def test_every_failure_decision_calls_the_one_check() -> None:
    found: set[tuple[str, str, str]] = set()
    for path in sorted((ROOT / "app").rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        upstream = (ast.get_docstring(tree) or "").startswith("Upstream compatibility")
        if relative.startswith(SKIPPED) or upstream:
            continue
        found.update((relative, scope, kind) for scope, kind in failure_checks(tree))
    assert sorted(found - set(ALLOWED)) == [], "decide with app.tool.base.result_failed"
    assert sorted(set(ALLOWED) - found) == [], "stale entries: remove them from ALLOWED"


def test_the_scan_sees_each_kind_of_ad_hoc_check() -> None:
    """The scan itself: each pattern it must catch, caught."""
    source = (
        "def f(r):\n"
        "    if isinstance(r, ToolFailure): pass\n"
        "    if r.error or r.is_error: pass\n"
        "    if r['success'] or r.get('success'): pass\n"
        "    if r.startswith('Error:'): pass\n"
        "    if result_failed(r): pass\n"
    )
    kinds = sorted(kind for _, kind in failure_checks(ast.parse(source)))
    assert kinds == sorted(
        [
            "isinstance Failure",
            ".error as a test",
            ".is_error",
            "success key",
            "success key",
            "Error prefix",
            "result_failed()",
        ]
    )
