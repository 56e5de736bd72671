"""run_mcp.py as a real program: a subprocess against the scripted LLM server, which drives
the MCP agent through our own MCP server (started over stdio, or reached over HTTP)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.testing import call, text, tool_calls
from tests.mcp_helpers import ROOT, http_server, write_config
from tests.test_main_e2e import run_program

pytestmark = pytest.mark.e2e

RUN_MCP = ROOT / "run_mcp.py"


def run_mcp(tmp_path: Path, *args: str, stdin: str | None = None):
    return run_program(RUN_MCP, tmp_path, *args, stdin=stdin, timeout=120)


def tool_results(request) -> list[str]:
    return [m["content"] for m in request.messages if m["role"] == "tool"]


def test_prompt_runs_a_tool_on_our_server_and_terminates(tmp_path, llm_server):
    llm_server.push(
        tool_calls(call("mcp_openmanus_bash", {"command": "echo made by mcp > out.txt"})),
        tool_calls(
            call("mcp_openmanus_terminate", {"status": "success"}), content="Wrote out.txt."
        ),
    )
    config = write_config(tmp_path, llm_server.base_url)
    proc = run_mcp(tmp_path, "--config", str(config), "-p", "write out.txt")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "Wrote out.txt."
    assert (tmp_path / "ws" / "out.txt").read_text() == "made by mcp\n"
    assert len(llm_server.requests) == 2
    offered = {t["function"]["name"] for t in llm_server.requests[0].tools}
    assert {"mcp_openmanus_bash", "mcp_openmanus_terminate"} <= offered


def test_interactive_mode_keeps_one_connection(tmp_path, llm_server):
    # $PPID in the server's bash session is the server process: the same in both tasks.
    llm_server.push(
        tool_calls(call("mcp_openmanus_bash", {"command": "echo server=$PPID"})),
        text("one"),
        tool_calls(call("mcp_openmanus_bash", {"command": "echo server=$PPID"})),
        text("two"),
    )
    config = write_config(tmp_path, llm_server.base_url)
    proc = run_mcp(tmp_path, "--config", str(config), "-i", stdin="first task\nsecond task\nq\n")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["one", "two"]
    first = tool_results(llm_server.requests[1])[-1]
    second = tool_results(llm_server.requests[3])[-1]
    assert "server=" in first and first.split("server=")[1] == second.split("server=")[1]


def test_http_connection_to_a_running_server(tmp_path, llm_server):
    server_args = [
        "-m",
        "app.mcp.server",
        "--transport",
        "http",
        "--port",
        "0",
        "--workspace",
        str(tmp_path / "served"),
    ]
    with http_server(server_args, tmp_path) as (_proc, url):
        llm_server.push(
            tool_calls(call("mcp_openmanus_bash", {"command": "pwd"})),
            text("done over http"),
        )
        config = write_config(tmp_path, llm_server.base_url)
        proc = run_mcp(
            tmp_path,
            "--config",
            str(config),
            "--connection",
            "http",
            "--server-url",
            url,
            "-p",
            "where are you?",
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == "done over http"
        assert str(tmp_path / "served") in tool_results(llm_server.requests[1])[-1]


def test_unreachable_server_is_one_clear_error(tmp_path, llm_server):
    config = write_config(tmp_path, llm_server.base_url)
    proc = run_mcp(
        tmp_path,
        "--config",
        str(config),
        "--connection",
        "http",
        "--server-url",
        "http://127.0.0.1:9/mcp",
        "-p",
        "hi",
    )
    assert proc.returncode == 1
    assert "error: MCP server" in proc.stderr and "http://127.0.0.1:9/mcp" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert llm_server.requests == []


def test_usage_errors(tmp_path):
    proc = run_mcp(tmp_path, "--server-url", "http://127.0.0.1:9/sse", "-p", "x")
    assert proc.returncode == 2 and "--server-url needs --connection sse or http" in proc.stderr
    missing = run_mcp(tmp_path, "--config", str(tmp_path / "nope.toml"), "-p", "x")
    assert missing.returncode == 2 and "error:" in missing.stderr
