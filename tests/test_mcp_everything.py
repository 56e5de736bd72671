"""Our MCP client against the reference server, ``@modelcontextprotocol/server-everything``
(npm, installed by scripts/setup-npm-tools.sh), over stdio and streamable HTTP: sampling,
elicitation, roots, progress, resource links, embedded blobs and task-only tools."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from app.agent.toolcall import ToolCallAgent
from app.cli.render import EventRenderer
from app.config import MCPServerConfig, MCPSettings
from app.events import ToolProgress, ToolResultEvent
from app.logger import logger
from app.testing import call, text, tool_calls
from app.tool.ask_human import QueueInputProvider
from app.tool.base import ToolFailure
from app.tool.mcp import MCPClients
from app.tool.mcp_features import MCPClientFeatures
from tests.conftest import TEST_API_KEY
from tests.npm_tools import everything_http, node_env, npm_bin

pytestmark = pytest.mark.e2e

LONG = "mcp_everything_trigger-long-running-operation"


def stdio_config(**overrides: object) -> MCPServerConfig:
    values: dict[str, object] = {
        "type": "stdio",
        "command": str(npm_bin("mcp-server-everything")),
        "args": ["stdio"],
        "env": {
            k: v
            for k, v in node_env().items()
            if k in {"PATH", "NO_UPDATE_NOTIFIER", "DO_NOT_TRACK", "HOME"}
        },
    }
    values.update(overrides)
    return MCPServerConfig(**values)  # type: ignore[arg-type]


@dataclass
class Setup:
    clients: MCPClients
    transport: str
    workspace: Path
    inputs: QueueInputProvider
    base: MCPServerConfig

    async def connect(self, **overrides: object) -> list[str]:
        return await self.clients.connect("everything", self.base.model_copy(update=overrides))


@pytest.fixture(params=["stdio", "http"])
async def everything(request, tmp_path) -> AsyncIterator[Setup]:
    """Clients whose server ``everything`` is reached over ``request.param``."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    inputs = QueueInputProvider()
    clients = MCPClients(
        connect_timeout=60, features=MCPClientFeatures(workspace=workspace, input_provider=inputs)
    )
    with contextlib.ExitStack() as stack:
        if request.param == "stdio":
            base = stdio_config()
        else:
            base = MCPServerConfig(type="http", url=stack.enter_context(everything_http()))
        try:
            yield Setup(clients, request.param, workspace, inputs, base)
        finally:
            await clients.disconnect()


async def test_capabilities_unlock_tools_and_task_only_tools_are_left_out(everything):
    clients = everything.clients
    names = await everything.connect()
    # The server offers these only to clients that declare sampling, elicitation and roots.
    for tool in ("trigger-sampling-request", "trigger-elicitation-request", "get-roots-list"):
        assert f"mcp_everything_{tool}" in names
    # simulate-research-query can only run as an MCP task (taskSupport "required").
    assert "mcp_everything_simulate-research-query" not in clients.tool_map
    assert "taskSupport: required" in clients.skipped["everything/simulate-research-query"]
    # ... and tools refreshed after the server's list_changed stay filtered.
    await clients.refresh()
    assert "mcp_everything_simulate-research-query" not in clients.tool_map


async def test_sampling_answered_by_the_agents_llm(everything, llm_server, make_llm):
    clients = everything.clients
    clients.features.llm = make_llm()
    await everything.connect(sampling=True)
    llm_server.push(text(f"Paris. (my key is {TEST_API_KEY})"))
    result = await clients.execute(
        name="mcp_everything_trigger-sampling-request",
        tool_input={"prompt": "Capital of France?", "maxTokens": 42},
    )
    assert not isinstance(result, ToolFailure), result
    sampled = json.loads(result.output.split("LLM sampling result:", 1)[1])
    assert sampled["content"] == {"type": "text", "text": "Paris. (my key is ***)"}
    assert sampled["role"] == "assistant" and sampled["model"] == "gpt-4o-mini"
    assert TEST_API_KEY not in result.output  # our secret never reaches the server
    body = llm_server.requests[0].body
    assert body["max_tokens"] == 42 and body["temperature"] == 0.7
    assert body["messages"][0] == {"role": "system", "content": "You are a helpful test server."}
    assert body["messages"][-1]["content"] == (
        "Resource trigger-sampling-request context: Capital of France?"
    )


async def test_sampling_refused_unless_allowed(everything, llm_server, make_llm):
    clients = everything.clients
    clients.features.llm = make_llm()
    await everything.connect()  # "sampling" defaults to false
    result = await clients.execute(
        name="mcp_everything_trigger-sampling-request", tool_input={"prompt": "hi"}
    )
    assert isinstance(result, ToolFailure)
    assert "Sampling is not allowed for MCP server 'everything'" in result.error
    assert '"sampling": true' in result.error
    assert llm_server.requests == []


async def test_elicitation_goes_to_the_input_provider(everything):
    clients, inputs = everything.clients, everything.inputs
    await everything.connect()
    # A wrong answer is explained and asked again; then a valid one is accepted.
    inputs.answer('{"name": "Ada", "integer": 500}')
    inputs.answer('{"name": "Ada", "integer": 7, "untitledSingleSelectEnum": "Joey"}')
    result = await clients.execute(name="mcp_everything_trigger-elicitation-request", tool_input={})
    assert not isinstance(result, ToolFailure), result
    first = await inputs.next_question()
    assert "MCP server 'everything' asks: Please provide inputs" in first
    assert "name (string, required)" in first and "integer (integer, optional" in first
    second = await inputs.next_question()
    assert second.startswith("'integer' must be at most 100. Please answer again.")
    assert "User provided the requested information" in result.output
    assert '"name": "Ada"' in result.output and '"integer": 7' in result.output
    assert '"untitledSingleSelectEnum": "Joey"' in result.output
    # Defaults of fields left out are filled in, as the form would.
    assert '"firstLine": "It was a dark and stormy night."' in result.output

    inputs.answer("decline")
    declined = await clients.execute(
        name="mcp_everything_trigger-elicitation-request", tool_input={}
    )
    assert "declined" in declined.output.lower()
    inputs.answer(None)  # nobody there: the question is dismissed
    cancelled = await clients.execute(
        name="mcp_everything_trigger-elicitation-request", tool_input={}
    )
    assert "cancel" in cancelled.output.lower()


async def test_roots_are_the_workspace(everything, tmp_path):
    clients, workspace = everything.clients, everything.workspace
    await everything.connect()
    listed = await clients.execute(name="mcp_everything_get-roots-list", tool_input={})
    assert f"URI: {workspace.resolve().as_uri()}" in listed.output
    if everything.transport != "stdio":
        return
    other = tmp_path / "other ws"
    other.mkdir()
    updated = asyncio.Event()  # the server asks for the roots again, then logs that it has them
    handler = logger.add(
        lambda m: "]: Roots updated" in m.record["message"] and updated.set(), level="DEBUG"
    )
    try:
        await clients.set_workspace(other)  # sends notifications/roots/list_changed
        await asyncio.wait_for(updated.wait(), 20)
    finally:
        logger.remove(handler)
    again = await clients.execute(name="mcp_everything_get-roots-list", tool_input={})
    assert f"URI: {other.resolve().as_uri()}" in again.output


async def test_resource_links_and_text_blobs_reach_the_model(everything):
    clients = everything.clients
    await everything.connect()
    links = await clients.execute(name="mcp_everything_get-resource-links", tool_input={"count": 2})
    assert (
        "[resource link: Blob Resource 1 <demo://resource/dynamic/blob/1> (text/plain) — "
        "Resource 1: plaintext resource]"
    ) in links.output
    assert "[resource link: Text Resource 2 <demo://resource/dynamic/text/2>" in links.output
    blob = await clients.execute(
        name="mcp_everything_get-resource-reference",
        tool_input={"resourceType": "Blob", "resourceId": 3},
    )
    assert "[embedded resource demo://resource/dynamic/blob/3 (text/plain)]" in blob.output
    assert "Resource 3: This is a base64 blob created at" in blob.output


async def test_progress_events_and_the_timeout_they_extend(everything, llm_server, make_llm):
    """Each step takes 0.5 s, the call 1.5 s; a 0.9 s timeout holds because progress
    notifications restart it. The agent turns them into ToolProgress events."""
    clients = everything.clients
    # Every report is passed on: at the default 0.5 s, reports 0.5 s apart are coalesced when
    # the machine delays one (test_caps.py tests the coalescing).
    clients.limits = MCPSettings(progress_interval=0)
    await everything.connect(timeout=0.9)
    llm_server.push(
        tool_calls(call(LONG, {"duration": 1.5, "steps": 3}, id="call_long")), text("done")
    )
    agent = ToolCallAgent(llm=make_llm(), available_tools=clients, max_steps=3)
    events = []
    agent.events.subscribe(events.append)
    terminal = io.StringIO()
    agent.events.subscribe(EventRenderer(terminal))
    result = await agent.run("run the long operation")
    assert result.final_answer == "done"
    progress = [e for e in events if isinstance(e, ToolProgress)]
    assert [(e.progress, e.total) for e in progress] == [(1, 3), (2, 3), (3, 3)]
    assert {(e.call_id, e.name, e.step) for e in progress} == {("call_long", LONG, 1)}
    finished = next(e for e in events if isinstance(e, ToolResultEvent))
    assert not finished.error and "Long running operation completed" in finished.output
    assert events.index(progress[-1]) < events.index(finished)
    assert f"⏳ {LONG} 2/3 (67%)" in terminal.getvalue()


async def test_progress_cannot_extend_a_call_past_max_timeout(everything):
    clients = everything.clients
    await everything.connect(timeout=0.9, max_timeout=1.2)
    result = await clients.execute(name=LONG, tool_input={"duration": 5, "steps": 10})
    assert isinstance(result, ToolFailure)
    assert "did not finish 'trigger-long-running-operation' within 1.2 s in all" in result.error
    # Without progress at all, the plain timeout applies.
    await everything.connect(timeout=0.9)
    silent = await clients.execute(name=LONG, tool_input={"duration": 2, "steps": 1})
    assert isinstance(silent, ToolFailure)
    assert "did not answer 'trigger-long-running-operation' within 0.9 s" in silent.error
