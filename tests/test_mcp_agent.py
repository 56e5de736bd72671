"""MCPAgent and Manus with MCP servers: real server subprocesses, scripted LLM over HTTP."""

from __future__ import annotations

import os
import signal
import sys

import pytest

from app.agent.manus import Manus
from app.agent.mcp import MCPAgent
from app.config import AppConfig, MCPServerConfig, MCPSettings, config
from app.schema import AgentState
from app.testing import call, text, tool_calls
from tests.conftest import llm_settings
from tests.mcp_helpers import DEMO, PNG_B64, demo_config, guarded_env

pytestmark = pytest.mark.e2e


@pytest.fixture
async def agent(make_llm):
    mcp_agent = MCPAgent(llm=make_llm())
    try:
        yield mcp_agent
    finally:
        await mcp_agent.cleanup()


async def connect_demo(agent: MCPAgent, script: str = str(DEMO)) -> None:
    await agent.initialize(
        "stdio", command=sys.executable, args=[script], env=guarded_env(), server_id="demo"
    )


def tool_results(request) -> list[str]:
    return [m["content"] for m in request.messages if m["role"] == "tool"]


async def test_terminate_on_our_server_ends_the_run(agent, llm_server, tmp_path):
    await agent.initialize(
        "stdio",
        command=sys.executable,
        env=guarded_env(),
        args=["-m", "app.mcp.server", "--workspace", str(tmp_path)],
    )
    assert "mcp_openmanus_bash" in agent.available_tools.tool_map
    assert "mcp_openmanus_bash" in agent.system_prompt and "{tools}" not in agent.system_prompt
    llm_server.push(
        tool_calls(call("mcp_openmanus_bash", {"command": "echo hello > greeting.txt"})),
        tool_calls(call("mcp_openmanus_terminate", {"status": "success"}), content="Done."),
    )
    result = await agent.run("write a greeting")
    assert result.state == AgentState.FINISHED and result.steps == 2
    assert result.final_answer == "Done."
    assert (tmp_path / "greeting.txt").read_text() == "hello\n"
    offered = {t["function"]["name"] for t in llm_server.requests[0].tools}
    assert offered == set(agent.tool_schemas) and "mcp_openmanus_terminate" in offered


async def test_images_from_tools_reach_the_model(agent, llm_server):
    await connect_demo(agent)
    llm_server.push(tool_calls(call("mcp_demo_picture", {})), text("A green pixel."))
    result = await agent.run("show me the picture")
    assert result.final_answer == "A green pixel."
    parts = [
        part
        for m in llm_server.requests[1].messages
        if isinstance(m["content"], list)
        for part in m["content"]
    ]
    urls = [p["image_url"]["url"] for p in parts if p.get("type") == "image_url"]
    assert urls == [f"data:image/png;base64,{PNG_B64}"]


async def test_stays_connected_across_runs(agent, llm_server):
    await connect_demo(agent)
    llm_server.push(
        tool_calls(call("mcp_demo_pid", {})),
        text("first"),
        tool_calls(call("mcp_demo_pid", {})),
        text("second"),
    )
    assert (await agent.run("one")).final_answer == "first"
    assert (await agent.run("two")).final_answer == "second"
    first, second = tool_results(llm_server.requests[1]), tool_results(llm_server.requests[3])
    assert first[-1] == second[-1] and first[-1].split()[-1].isdigit()  # the same server process


async def test_tool_list_changes_reach_the_model(agent, llm_server):
    await connect_demo(agent)
    llm_server.push(
        tool_calls(call("mcp_demo_grow", {})),
        tool_calls(call("mcp_demo_extra", {})),
        text("Used the new tool."),
    )
    result = await agent.run("grow and use the new tool")
    assert result.final_answer == "Used the new tool."
    assert "mcp_demo_extra" not in {t["function"]["name"] for t in llm_server.requests[0].tools}
    assert "mcp_demo_extra" in {t["function"]["name"] for t in llm_server.requests[1].tools}
    notes = [m["content"] for m in llm_server.requests[1].messages if m["role"] == "user"]
    assert any("New: mcp_demo_extra" in note for note in notes)
    assert "extra!" in tool_results(llm_server.requests[2])[-1]
    assert "mcp_demo_extra" in agent.tool_schemas and "mcp_demo_extra" in agent.system_prompt


async def test_a_server_that_is_gone_ends_the_run_clearly(agent, llm_server, tmp_path):
    script = tmp_path / "demo.py"
    script.write_text(DEMO.read_text(encoding="utf-8"), encoding="utf-8")
    await connect_demo(agent, str(script))
    pid = int((await agent.available_tools.execute(name="mcp_demo_pid", tool_input={})).output)
    script.unlink()
    os.kill(pid, signal.SIGKILL)
    llm_server.push(
        tool_calls(call("mcp_demo_echo", {"text": "a"})),
        tool_calls(call("mcp_demo_echo", {"text": "b"})),
    )
    result = await agent.run("echo something")
    assert result.state == AgentState.ERROR and not result.ok
    assert "no longer available" in result.final_answer and "demo.py" in result.final_answer
    assert len(llm_server.requests) == 2
    lost, unreachable = tool_results(llm_server.requests[1])[-1], result.step_results[1]
    assert "connection was lost" in lost
    assert "could not be used" in unreachable


async def test_initialize_rejects_bad_arguments(agent):
    with pytest.raises(ValueError, match="Command is required"):
        await agent.initialize("stdio")
    with pytest.raises(ValueError, match="Unsupported connection type"):
        await agent.initialize("pigeon", server_url="x")
    result = await agent.run("anything")  # nothing connected: a clear answer, no LLM call
    assert result.state == AgentState.ERROR and "No MCP server is connected" in result.final_answer


async def test_manus_create_connects_configured_servers(llm_server, make_llm, tmp_path):
    servers = {
        "demo": demo_config(),
        "broken": MCPServerConfig(type="stdio", command="no-such-mcp-server"),
    }
    config.use(
        AppConfig(
            llm=llm_settings(llm_server),
            mcp_config=MCPSettings(servers=servers),
            workspace_root=tmp_path,
        )
    )
    try:
        agent = await Manus.create(llm=make_llm())
        try:
            assert list(agent.mcp_failures) == ["broken"]
            assert "command not found" in agent.mcp_failures["broken"]
            assert list(agent.connected_servers) == ["demo"]
            names = agent.available_tools.tool_map
            assert "python_execute" in names and "mcp_demo_echo" in names
            llm_server.push(
                tool_calls(call("mcp_demo_echo", {"text": "via manus"})),
                tool_calls(call("terminate", {"status": "success"}), content="ok"),
            )
            result = await agent.run("echo via the MCP server")
            assert result.ok
            assert "via manus" in tool_results(llm_server.requests[1])[-1]
            offered = {t["function"]["name"] for t in llm_server.requests[0].tools}
            assert {"mcp_demo_echo", "bash", "terminate"} <= offered
            assert agent.mcp_clients.sessions  # still connected after the run
        finally:
            await agent.cleanup()
        assert agent.mcp_clients.sessions == {}
    finally:
        config.reset()
