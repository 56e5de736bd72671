"""Manus and SWEAgent: their tools, prompts and workspace, and a run through real tools."""

from __future__ import annotations

import pytest

from app.agent import Manus, SWEAgent
from app.prompt.manus import SYSTEM_PROMPT as MANUS_PROMPT
from app.schema import AgentState
from app.testing import call, text, tool_calls
from app.tool import AskHuman, Bash, PythonExecute, StrReplaceEditor, Terminate


async def test_manus_defaults(make_llm, tmp_path):
    agent = await Manus.create(llm=make_llm(), workspace=tmp_path / "ws")
    assert agent.name == "Manus" and agent.max_steps == 20 and agent.max_observe == 10000
    names = list(agent.available_tools.tool_map)
    assert names[:4] == ["python_execute", "bash", "str_replace_editor", "ask_human"]
    assert names[-1] == "terminate" and agent.special_tool_names == ["terminate"]
    assert (tmp_path / "ws").is_dir()
    assert str(tmp_path / "ws") in agent.system_prompt and "{directory}" not in agent.system_prompt
    assert "{directory}" in MANUS_PROMPT  # filled per instance, not at import
    for tool in agent.available_tools:
        if isinstance(tool, PythonExecute | Bash | StrReplaceEditor):
            assert tool.workspace == tmp_path / "ws"
    other = Manus(llm=make_llm(), workspace=tmp_path / "other")
    assert other.available_tools is not agent.available_tools
    assert str(tmp_path / "other") in other.system_prompt


async def test_swe_agent_defaults(make_llm, tmp_path):
    agent = SWEAgent(llm=make_llm(), workspace=tmp_path)
    assert agent.name == "swe" and agent.max_steps == 20
    assert list(agent.available_tools.tool_map) == ["bash", "str_replace_editor", "terminate"]
    assert str(tmp_path) in agent.system_prompt


@pytest.mark.e2e
async def test_swe_agent_edits_and_runs_in_its_workspace(llm_server, make_llm, tmp_path):
    llm_server.push(
        tool_calls(
            call(
                "str_replace_editor",
                {"command": "create", "path": "a.txt", "file_text": "one\ttwo\n"},
            )
        ),
        tool_calls(call("bash", {"command": "cat a.txt && pwd"})),
        tool_calls(call("terminate", {"status": "success"}), content="done"),
    )
    agent = SWEAgent(llm=make_llm(), workspace=tmp_path)
    result = await agent.run("make a file")
    assert result.state == AgentState.FINISHED
    assert (tmp_path / "a.txt").read_bytes() == b"one\ttwo\n"
    bash_out = next(
        m["content"]
        for m in llm_server.requests[2].body["messages"]
        if m["role"] == "tool" and m.get("name") == "bash"
    )
    assert "one\ttwo" in bash_out and str(tmp_path) in bash_out


@pytest.mark.e2e
async def test_manus_tools_are_usable_after_cleanup(llm_server, make_llm, tmp_path):
    """run() cleans the tools up afterwards; a follow-up run starts them again."""
    llm_server.push(
        tool_calls(call("bash", {"command": "echo first"})),
        text("ok"),
        tool_calls(call("bash", {"command": "echo second"})),
        text("ok again"),
    )
    agent = Manus(llm=make_llm(), workspace=tmp_path)
    await agent.run("one")
    result = await agent.run("two")
    assert result.final_answer == "ok again"
    outputs = [m["content"] for m in llm_server.requests[3].body["messages"] if m["role"] == "tool"]
    assert "second" in outputs[-1]


def test_upstream_import_paths():
    import app.agent
    import app.tool

    assert AskHuman().name == "ask_human" and Terminate().name == "terminate"
    assert set(app.agent.__all__) >= {"BaseAgent", "ReActAgent", "ToolCallAgent", "Manus"}
    for name in app.tool.__all__:
        assert getattr(app.tool, name).__name__ == name
