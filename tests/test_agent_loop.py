"""The ToolCallAgent loop, end to end over real HTTP against the scripted server."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import pytest

from app.agent.toolcall import ToolCallAgent
from app.exceptions import AgentStateError, LLMAuthenticationError, ToolError
from app.prompt.toolcall import NEXT_STEP_PROMPT, REQUIRED_TOOL_PROMPT, STUCK_PROMPT
from app.schema import AgentState, Message
from app.testing import call, error, text, tool_calls
from app.tool.base import BaseTool, ToolResult
from app.tool.terminate import Terminate
from app.tool.tool_collection import ToolCollection
from tests.tool_fixtures import Echo

# A 1x1 PNG.
PNG_B64 = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
        "0000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
    )
).decode()


class Boom(BaseTool):
    name: str = "boom"
    description: str = "Always fails."
    parameters: dict[str, Any] | None = {"type": "object", "properties": {}}

    async def execute(self) -> str:
        raise RuntimeError("kaboom")


class Picky(BaseTool):
    name: str = "picky"
    description: str = "Raises a ToolError the model can act on."
    parameters: dict[str, Any] | None = {"type": "object", "properties": {}}

    async def execute(self) -> str:
        raise ToolError("use a smaller number")


class Camera(BaseTool):
    name: str = "camera"
    description: str = "Returns a picture."
    parameters: dict[str, Any] | None = {"type": "object", "properties": {}}

    async def execute(self) -> ToolResult:
        return ToolResult(output="took a picture", base64_image=PNG_B64)


def make_agent(llm: Any, *tools: BaseTool, **kw: Any) -> ToolCallAgent:
    collection = ToolCollection(*(tools or (Echo(calls=[]),)), Terminate())
    return ToolCallAgent(llm=llm, available_tools=collection, **kw)


async def test_run_calls_tools_then_terminates(llm_server, make_llm):
    echo = Echo(calls=[])
    llm_server.push(
        tool_calls(call("echo", {"text": "a"}), content="Let me echo a."),
        tool_calls(call("echo", {"text": "b"}), call("echo", {"text": "c"})),
        tool_calls(call("terminate", {"status": "success"})),
    )
    agent = make_agent(make_llm(), echo)
    result = await agent.run("echo three letters")

    assert echo.calls == ["a", "b", "c"]
    assert agent.state == AgentState.FINISHED
    assert result.state == AgentState.FINISHED and result.steps == 3 and result.ok
    assert str(result).startswith("Step 1: Observed output of cmd `echo` executed:\necho: a")
    assert "Step 3: Observed output of cmd `terminate` executed" in str(result)
    assert result.final_answer == "Let me echo a."
    assert result.usage.requests == 3 and result.usage.total_tokens > 0

    requests = llm_server.requests
    assert len(requests) == 3
    for req in requests:
        msgs = req.body["messages"]
        assert msgs[0] == {"role": "system", "content": agent.system_prompt}
        assert msgs[-1] == {"role": "user", "content": NEXT_STEP_PROMPT}
        assert msgs[1] == {"role": "user", "content": "echo three letters"}
        assert [t["function"]["name"] for t in req.body["tools"]] == ["echo", "terminate"]
        assert req.body["tool_choice"] == "auto"
    # Every tool result is paired with the id of a call in the assistant message before it.
    last = requests[2].body["messages"]
    pending: set[str] = set()
    for msg in last:
        if msg["role"] == "assistant" and msg.get("tool_calls"):
            assert not pending
            pending = {c["id"] for c in msg["tool_calls"]}
        elif msg["role"] == "tool":
            assert msg["tool_call_id"] in pending
            pending.remove(msg["tool_call_id"])
    assert not pending
    tool_msgs = [m for m in last if m["role"] == "tool"]
    assert [m["content"].splitlines()[-1] for m in tool_msgs] == ["echo: a", "echo: b", "echo: c"]
    # The next-step prompt is sent each time but never stored in memory.
    assert all(m.content != NEXT_STEP_PROMPT for m in agent.memory.messages)


async def test_text_answer_ends_run(llm_server, make_llm):
    llm_server.push(text("Hello! How can I help?"))
    agent = make_agent(make_llm())
    result = await agent.run("hello")
    assert result.state == AgentState.FINISHED
    assert result.steps == 1
    assert result.final_answer == "Hello! How can I help?"
    assert str(result) == "Step 1: Hello! How can I help?"
    assert len(llm_server.requests) == 1


async def test_text_answer_can_continue_until_max_steps(llm_server, make_llm):
    llm_server.push(text("thinking"), text("still thinking"), text("more"))
    agent = make_agent(make_llm(), text_answer_ends_run=False, max_steps=3)
    result = await agent.run("go")
    assert agent.state == AgentState.IDLE
    assert result.steps == 3
    assert str(result).endswith("Terminated: Reached max steps (3)")
    assert not result.ok


async def test_max_steps_exhaustion(llm_server, make_llm):
    llm_server.push(*[tool_calls(call("echo", {"text": str(i)})) for i in range(4)])
    agent = make_agent(make_llm(), max_steps=4)
    result = await agent.run("loop")
    assert result.state == AgentState.IDLE == agent.state
    assert result.steps == 4 and agent.current_step == 4
    assert result.step_results[-1] == "Terminated: Reached max steps (4)"


async def test_tool_choice_none(llm_server, make_llm):
    # Even if the model asks for a tool, nothing runs in NONE mode.
    echo = Echo(calls=[])
    llm_server.push(tool_calls(call("echo", {"text": "x"}), content="Plain answer."))
    agent = make_agent(make_llm(), echo, tool_choices="none")
    result = await agent.run("q")
    assert llm_server.requests[0].body["tool_choice"] == "none"
    assert echo.calls == []
    assert result.final_answer == "Plain answer."
    assert agent.state == AgentState.FINISHED
    assert all(not m.tool_calls for m in agent.memory.messages)


async def test_tool_choice_required(llm_server, make_llm):
    llm_server.push(
        text("I refuse to use tools"), tool_calls(call("terminate", {"status": "success"}))
    )
    agent = make_agent(make_llm(), tool_choices="required")
    result = await agent.run("q")
    assert llm_server.requests[0].body["tool_choice"] == "required"
    assert result.step_results[0].startswith("Step 1: Error: a tool call was required")
    # The model was told why, and the run then ended normally.
    second = llm_server.requests[1].body["messages"]
    assert {"role": "user", "content": REQUIRED_TOOL_PROMPT} in second
    assert result.state == AgentState.FINISHED and result.steps == 2


async def test_tool_choice_auto_sent_by_default(llm_server, make_llm):
    llm_server.push(text("done"))
    await make_agent(make_llm()).run("q")
    assert llm_server.requests[0].body["tool_choice"] == "auto"


async def test_stuck_detection_adds_a_one_off_hint(llm_server, make_llm):
    same = tool_calls(call("echo", {"text": "same"}))
    llm_server.push(same, same, same, tool_calls(call("echo", {"text": "new"})), text("ok"))
    agent = make_agent(make_llm(), max_steps=5)
    await agent.run("q")
    last_user = [r.body["messages"][-1]["content"] for r in llm_server.requests]
    # Requests 1-3 carry the normal prompt; after the third identical answer the hint appears
    # once, and is gone again from the fifth request.
    assert all(STUCK_PROMPT not in c for c in last_user[:3])
    assert last_user[3].startswith(STUCK_PROMPT) and NEXT_STEP_PROMPT in last_user[3]
    assert last_user[4] == NEXT_STEP_PROMPT
    assert sum(STUCK_PROMPT in (m.content or "") for m in agent.memory.messages) == 0


async def test_stuck_needs_consecutive_repeats(llm_server, make_llm):
    agent = make_agent(make_llm())
    agent.memory.add_messages(
        [
            Message.assistant_message("same"),
            Message.assistant_message("other"),
            Message.assistant_message("same"),
            Message.assistant_message("same"),
        ]
    )
    assert not agent.is_stuck()
    agent.memory.add_message(Message.assistant_message("same"))
    assert agent.is_stuck()


@pytest.mark.parametrize(
    "arguments",
    [
        {"text": "dict"},  # JSON text, as real APIs send
        json.dumps(json.dumps({"text": "dict"})),  # double-encoded
        '```json\n{"text": "dict"}\n```',  # fenced
    ],
)
async def test_tolerated_argument_forms(llm_server, make_llm, arguments):
    echo = Echo(calls=[])
    llm_server.push(tool_calls(call("echo", arguments)), text("done"))
    await make_agent(make_llm(), echo).run("q")
    assert echo.calls == ["dict"]


async def test_arguments_as_json_object(llm_server, make_llm):
    echo = Echo(calls=[])
    llm_server.push(tool_calls(call("echo", {"text": "obj"}, raw_object=True)), text("done"))
    await make_agent(make_llm(), echo).run("q")
    assert echo.calls == ["obj"]


async def test_malformed_arguments_go_back_to_the_model(llm_server, make_llm):
    echo = Echo(calls=[])
    llm_server.push(tool_calls(call("echo", '{"text": "unterminated')), text("sorry"))
    result = await make_agent(make_llm(), echo).run("q")
    assert echo.calls == []
    tool_msg = next(m for m in llm_server.requests[1].body["messages"] if m["role"] == "tool")
    assert tool_msg["content"].startswith("Error: Could not parse the arguments of tool 'echo'")
    assert result.state == AgentState.FINISHED


async def test_missing_required_argument(llm_server, make_llm):
    llm_server.push(tool_calls(call("echo", {})), text("ok"))
    await make_agent(make_llm()).run("q")
    tool_msg = next(m for m in llm_server.requests[1].body["messages"] if m["role"] == "tool")
    assert "- text: missing required argument; expected string" in tool_msg["content"]


async def test_unexpected_argument(llm_server, make_llm):
    llm_server.push(tool_calls(call("echo", {"text": "a", "volume": 11})), text("ok"))
    await make_agent(make_llm()).run("q")
    tool_msg = next(m for m in llm_server.requests[1].body["messages"] if m["role"] == "tool")
    assert "Invalid arguments for tool 'echo'" in tool_msg["content"]
    assert "volume" in tool_msg["content"]


async def test_unknown_tool(llm_server, make_llm):
    llm_server.push(tool_calls(call("fly", {"to": "moon"})), text("ok"))
    result = await make_agent(make_llm()).run("q")
    tool_msg = next(m for m in llm_server.requests[1].body["messages"] if m["role"] == "tool")
    assert tool_msg["content"] == "Error: Unknown tool 'fly'. Available tools: echo, terminate."
    assert result.state == AgentState.FINISHED


async def test_tool_exceptions_become_results(llm_server, make_llm):
    llm_server.push(tool_calls(call("boom", {}), call("picky", {})), text("ok"))
    result = await make_agent(make_llm(), Boom(), Picky()).run("q")
    tool_msgs = [m for m in llm_server.requests[1].body["messages"] if m["role"] == "tool"]
    assert "Error: Tool 'boom' failed: RuntimeError: kaboom" in tool_msgs[0]["content"]
    assert tool_msgs[1]["content"].endswith("Error: use a smaller number")
    assert result.state == AgentState.FINISHED


async def test_terminate_with_bad_status_does_not_finish(llm_server, make_llm):
    llm_server.push(
        tool_calls(call("terminate", {})), tool_calls(call("terminate", {"status": "success"}))
    )
    result = await make_agent(make_llm()).run("q")
    assert result.steps == 2 and result.state == AgentState.FINISHED


async def test_follow_up_run_keeps_the_conversation(llm_server, make_llm):
    llm_server.push(text("Paris."), text("About 2.1 million."))
    agent = make_agent(make_llm())
    first = await agent.run("Capital of France?")
    second = await agent.run("Its population?")
    assert first.final_answer == "Paris." and second.final_answer == "About 2.1 million."
    assert second.steps == 1 and agent.state == AgentState.FINISHED
    contents = [m.get("content") for m in llm_server.requests[1].body["messages"]]
    assert contents[1:4] == ["Capital of France?", "Paris.", "Its population?"]


async def test_llm_failure_ends_run_in_error_without_retry(llm_server, make_llm):
    llm_server.push(error(401, "bad key"))
    agent = make_agent(make_llm())
    result = await agent.run("q")
    assert agent.state == AgentState.ERROR == result.state
    assert isinstance(result.error, LLMAuthenticationError)
    assert "api_key" in str(result.error)
    assert len(llm_server.requests) == 1
    # The agent can be used again afterwards.
    llm_server.push(text("fine now"))
    assert (await agent.run("again")).final_answer == "fine now"


async def test_run_while_running_is_refused(llm_server, make_llm):
    agent = make_agent(make_llm())
    agent.state = AgentState.RUNNING
    with pytest.raises(AgentStateError):
        await agent.run("q")


async def test_tool_collections_are_per_instance(make_llm):
    llm = make_llm()
    a, b = ToolCallAgent(llm=llm), ToolCallAgent(llm=llm)
    assert a.available_tools is not b.available_tools
    a.available_tools.add_tool(Echo(calls=[]))
    assert "echo" in a.available_tools.tool_map and "echo" not in b.available_tools.tool_map


async def test_tool_images_reach_the_model_in_a_user_message(llm_server, make_llm):
    llm_server.push(tool_calls(call("camera", {})), text("I see it"))
    await make_agent(make_llm(model="gpt-4o"), Camera()).run("look")
    msgs = llm_server.requests[1].body["messages"]
    tool_index = next(i for i, m in enumerate(msgs) if m["role"] == "tool")
    assert isinstance(msgs[tool_index]["content"], str)
    image_msg = msgs[tool_index + 1]
    assert image_msg["role"] == "user"
    urls = [p["image_url"]["url"] for p in image_msg["content"] if p["type"] == "image_url"]
    assert urls == [f"data:image/png;base64,{PNG_B64}"]


async def test_tool_images_for_a_text_only_model_become_a_note(llm_server, make_llm):
    llm_server.push(tool_calls(call("camera", {})), text("ok"))
    await make_agent(make_llm(model="my-text-model"), Camera()).run("look")
    msgs = llm_server.requests[1].body["messages"]
    assert not any(isinstance(m.get("content"), list) for m in msgs)
    tool_msg = next(m for m in msgs if m["role"] == "tool")
    assert "image was omitted" in tool_msg["content"]


async def test_max_observe_truncates(llm_server, make_llm):
    llm_server.push(tool_calls(call("echo", {"text": "x" * 500})), text("ok"))
    await make_agent(make_llm(), max_observe=100).run("q")
    tool_msg = next(m for m in llm_server.requests[1].body["messages"] if m["role"] == "tool")
    assert tool_msg["content"].startswith("Observed output")
    assert "[truncated:" in tool_msg["content"] and len(tool_msg["content"]) < 200


async def test_cleanup_runs_after_each_run(llm_server, make_llm):
    cleaned = asyncio.Event()

    class Holder(Echo):
        async def cleanup(self) -> None:
            cleaned.set()

    llm_server.push(text("hi"))
    await make_agent(make_llm(), Holder(calls=[])).run("q")
    assert cleaned.is_set()
