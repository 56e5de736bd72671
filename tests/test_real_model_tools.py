"""Tool calling against a real server: what the framework sends, remembers and executes.

llama-cpp-python's ``chatml-function-calling`` format refuses to stream tool calls (HTTP 200
with an empty event stream); SmolLM2's own template drops the tools from the prompt. A tool
call written as text is made deterministic with a llama.cpp ``grammar`` that the recording
proxy adds on the way to the server: the model can then write nothing but that call.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.agent.toolcall import ToolCallAgent
from app.config import CompactionSettings
from app.llm import LLM
from app.schema import AgentState, Message
from app.testing.proxy import RecordingProxy
from app.tool.python_execute import PythonExecute
from app.tool.terminate import Terminate
from app.tool.tool_collection import ToolCollection
from tests.real_model_fixtures import ROOT, child_env, real_settings

pytestmark = pytest.mark.real_model

TERMINATE = Terminate().to_param()
PYTHON = PythonExecute().to_param()

#: A tool call written as text, in the form the text tool-calling mode reads.
TEXT_CALL = '<tool_call>{"name": "terminate", "arguments": {"status": "success"}}</tool_call>'


def literal_grammar(text: str) -> str:
    """A GBNF grammar whose only sentence is ``text``."""
    return "root ::= " + json.dumps(text)


def force_text(text: str):
    """A proxy rewrite: every chat request may only be answered with ``text``."""

    def rewrite(body: dict) -> dict:
        return {**body, "grammar": literal_grammar(text)}

    return rewrite


def agent_on(llm: LLM, **kw) -> ToolCallAgent:
    return ToolCallAgent(
        llm=llm, available_tools=ToolCollection(Terminate()), compaction=CompactionSettings(), **kw
    )


# ---- streaming with tools refused, remembered across processes ---------------------------

_ONE_TURN = """
import asyncio, json, sys
from app.config import LLMSettings
from app.llm import LLM
from app.schema import Message

async def main():
    llm = LLM.create(llm_config=LLMSettings(**json.loads(sys.argv[1])))
    deltas = []
    response = await llm.request([Message.user_message("Finish the task now.")],
                                 tools=[json.loads(sys.argv[2])], on_delta=deltas.append)
    print(json.dumps({"finish_reason": response.finish_reason,
                      "calls": len(response.message.tool_calls or [])}))

asyncio.run(main())
"""


def run_turn(tmp_path: Path, base_url: str) -> subprocess.CompletedProcess[str]:
    settings = real_settings(base_url).model_dump(mode="json")
    return subprocess.run(
        [sys.executable, "-c", _ONE_TURN, json.dumps(settings), json.dumps(TERMINATE)],
        capture_output=True,
        text=True,
        env=child_env(tmp_path),
        cwd=ROOT,
        timeout=150,
        stdin=subprocess.DEVNULL,
    )


async def test_refused_tool_stream_is_remembered_by_the_next_process(tmp_path, recording_proxy):
    """A streamed turn with tools gets an empty event stream: the turn still completes (asked
    again without streaming), the refusal is written to the endpoint memory, and a second
    process reads it and never streams with tools to that endpoint."""
    proxy = recording_proxy("smollm2-fc")
    first = run_turn(tmp_path, proxy.base_url)
    assert first.returncode == 0, first.stderr[-3000:]
    assert json.loads(first.stdout.strip().splitlines()[-1])["finish_reason"]
    sent = proxy.chat_requests()
    assert sent[0].stream and sent[0].has_tools and sent[0].status == 200
    assert b"data: {" not in sent[0].response  # the refusal: no events (pings at most)
    assert sent[-1].has_tools and not sent[-1].stream and sent[-1].status == 200

    memory = tmp_path / "cache" / "endpoints.json"
    assert memory.is_file(), "the refusal was not remembered in $OPENMANUS_CACHE_DIR"
    port = proxy.base_url.split(":")[2].split("/")[0]
    assert f"127.0.0.1:{port}" in json.dumps(json.loads(memory.read_text()))

    proxy.clear()
    second = run_turn(tmp_path, proxy.base_url)
    assert second.returncode == 0, second.stderr[-3000:]
    again = proxy.chat_requests()
    assert again, "the second process sent nothing"
    assert not [e for e in again if e.stream and e.has_tools], (
        "the second process streamed with tools again"
    )


# ---- tool calls written as text ---------------------------------------------------------------


async def test_text_mode_sends_no_tools_and_describes_them_in_the_system_prompt(
    real_llm, recording_proxy
):
    """tool_calling = "text" against SmolLM2's own template: no request carries a tools field,
    the system prompt describes each tool, and whatever the model writes the run ends in a
    defined state within max_steps, without raising."""
    proxy = recording_proxy("smollm2")
    llm = real_llm("smollm2", base_url=proxy.base_url, tool_calling="text", max_tokens=48)
    agent = agent_on(llm, max_steps=3)
    result = await agent.run("Finish the task by calling the terminate tool.")
    assert result.steps <= 3
    assert result.state in (AgentState.FINISHED, AgentState.IDLE, AgentState.ERROR)
    assert result.ok or result.failure, repr(result)  # finished, or failed saying why
    chats = proxy.chat_requests()
    assert chats and all(not e.has_tools for e in chats)
    for exchange in chats:
        system = exchange.messages[0]
        assert system["role"] == "system"
        assert "terminate" in system["content"]
        assert Terminate().description in system["content"]


async def test_a_tool_call_written_as_text_is_executed(real_llm, recording_proxy):
    """A reply that holds a tool call as text (forced by a grammar) is read as a tool call:
    terminate runs and the run finishes in one step."""
    proxy = recording_proxy("smollm2", rewrite=force_text(TEXT_CALL))
    llm = real_llm("smollm2", base_url=proxy.base_url, tool_calling="text", max_tokens=96)
    agent = agent_on(llm, max_steps=3)
    result = await agent.run("Finish the task.")
    served = proxy.chat_requests()[0].completion()
    assert served and TEXT_CALL in served["content"]  # the trick worked
    assert result.state == AgentState.FINISHED and result.steps == 1, repr(result)
    outputs = [m.content for m in agent.memory.messages if m.role == "tool"]
    assert any("completed with status: success" in (o or "") for o in outputs), outputs


async def test_text_mode_parses_the_call_at_the_model_layer(real_llm, recording_proxy):
    """The same at the model layer: request() returns the call as a structured tool call."""
    proxy = recording_proxy("smollm2", rewrite=force_text(TEXT_CALL))
    llm = real_llm("smollm2", base_url=proxy.base_url, tool_calling="text", max_tokens=96)
    response = await llm.request([{"role": "user", "content": "Finish."}], tools=[TERMINATE])
    assert not proxy.chat_requests()[0].has_tools
    calls = response.message.tool_calls or []
    assert [c.function.name for c in calls] == ["terminate"]
    assert json.loads(calls[0].function.arguments) == {"status": "success"}


async def test_auto_never_runs_or_remembers_a_call_written_as_prose(
    tmp_path, real_llm, recording_proxy
):
    """tool_calling = "auto" against SmolLM2's own template, which drops the tools it is sent
    and gets no HTTP error for it. The answer holds a call written as text (forced by a
    grammar): in a native turn that is the model's prose, not the endpoint's refusal, so it is
    not run, nothing is written to the capability file, and the next turn offers the tools
    natively again (a server like this one needs tool_calling = "text", tested above)."""
    proxy = recording_proxy("smollm2", rewrite=force_text(TEXT_CALL))
    llm = real_llm("smollm2", base_url=proxy.base_url, tool_calling="auto", max_tokens=96)
    agent = agent_on(llm, max_steps=2)
    await agent.run("Finish the task.")
    assert not [m for m in agent.memory.messages if m.role == "tool"]
    await agent.run("Finish this one too.")
    chats = proxy.chat_requests()
    assert len(chats) >= 2 and all(e.has_tools for e in chats)
    assert llm.refused_features == frozenset()
    assert not (tmp_path / "cache" / "endpoints.json").exists()


# ---- issue 29: an echoed tag is no tool call; chatml-function-calling's refusal at once --------

#: What a small model wrote after reading our old prompt: its prose sentence, echoed.
ECHO = "An answer with no <tool_call> block is your final answer. The tools are listed below."


def force_in_turns(*texts: str):
    """A proxy rewrite: the n-th chat request may only be answered with ``texts[n]`` (the
    last one for every request after)."""
    served: list[str] = []

    def rewrite(body: dict) -> dict:
        text = texts[min(len(served), len(texts) - 1)]
        served.append(text)
        return {**body, "grammar": literal_grammar(text)}

    return rewrite


async def test_an_echoed_call_tag_is_answered_as_an_unknown_tool_and_not_shown(
    real_llm, recording_proxy
):
    """The server writes the echo (forced by a grammar), then a real call. The echo's tag makes
    a nameless call: not shown as a tool call (no event), answered like an unknown tool (the
    model can correct itself), never "Invalid command format"; our own prompt names the tag
    only in its example."""
    from app.events import ToolCallEvent, ToolResultEvent

    proxy = recording_proxy("smollm2", rewrite=force_in_turns(ECHO, TEXT_CALL))
    llm = real_llm("smollm2", base_url=proxy.base_url, tool_calling="text", max_tokens=96)
    agent = agent_on(llm, max_steps=3)
    events: list[object] = []
    agent.subscribe(events.append)
    result = await agent.run("Finish the task.")
    chats = proxy.chat_requests()
    assert chats[0].completion()["content"] == ECHO  # the server wrote the echo
    assert chats[0].messages[0]["content"].count("<tool_call>") == 1  # ours: the example only
    assert result.state == AgentState.FINISHED and result.steps == 2, repr(result)
    shown = [e.name for e in events if isinstance(e, ToolCallEvent | ToolResultEvent)]
    assert shown == ["terminate", "terminate"]
    answer = next(m.content for m in agent.memory.messages if m.role == "tool")
    assert answer.startswith("Error: Unknown tool '' (the call names no tool)."), answer
    assert "Invalid command format" not in answer


async def test_first_contact_with_chatml_function_calling_costs_one_refused_stream(
    llama_pool, tmp_path
):
    """A fresh process meets a ``chatml-function-calling`` server: its first streamed turn
    with tools is refused (after the server evaluated the prompt), asked again plainly, and
    the next turn is plain: one refusal in the server's log, no second streamed probe."""
    server = llama_pool.get("smollm2-fc")
    proxy = RecordingProxy(server.base_url).start()
    logged = len(server.log_text())
    try:
        llm = LLM.create(llm_config=real_settings(proxy.base_url, max_tokens=24))
        for task in ("Use python_execute to print 6*7.", "Use python_execute to print 7*8."):
            await llm.request(
                [Message.user_message(task)],
                tools=[PYTHON],
                on_delta=lambda _: None,  # watched: the turn would stream if it could
            )
    finally:
        proxy.stop()
    chats = proxy.chat_requests()
    assert [(e.stream, e.status) for e in chats] == [(True, 200), (False, 200), (False, 200)]
    assert b"data: {" not in chats[0].response  # the refusal: pings at most
    log = server.log_text()[logged:]
    assert log.count('"POST /v1/chat/completions HTTP/1.1"') == 3
    assert log.count("Exception in ASGI application") == 1  # the one refusal
    assert "Automatic streaming tool choice is not supported" in log
    assert "stream_tools" in llm.refused_features
