"""Our MCP server (``python -m app.mcp.server``) as a subprocess, over stdio, HTTP and SSE."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from app.mcp.server import MCPServer
from app.testing import ScriptedLLMServer, text
from app.tool.base import ToolFailure
from app.tool.mcp import MCPClients
from tests.mcp_helpers import child_env, guarded_env, http_server, stop, write_config
from tests.proc_utils import alive
from tests.web_fixtures import WebServer, isolated_tempdir, processes_mentioning

SERVER = ["-m", "app.mcp.server"]


@pytest.fixture
async def clients():
    collection = MCPClients(connect_timeout=30)
    try:
        yield collection
    finally:
        await collection.disconnect()


async def connect_stdio(clients: MCPClients, tmp_path: Path, *extra: str) -> list[str]:
    args = [*SERVER, "--workspace", str(tmp_path / "ws"), *extra]
    return await clients.connect_stdio(sys.executable, args, env=guarded_env())


@pytest.mark.e2e
async def test_schemas_equal_the_in_process_tools(clients, tmp_path):
    names = await connect_stdio(clients, tmp_path)
    local = {tool.name: tool for tool in MCPServer.default_tools(tmp_path / "ws")}
    assert {n.removeprefix("mcp_openmanus_") for n in names} == set(local)
    assert {"bash", "python_execute", "str_replace_editor", "terminate"} <= set(local)
    for remote in clients:
        tool = local[remote.original_name]
        assert remote.parameters == tool.parameters  # enums and nested types intact
        assert remote.description == tool.description
    editor = clients.get_tool("mcp_openmanus_str_replace_editor").parameters
    assert editor["properties"]["command"]["enum"] == [
        "view",
        "create",
        "str_replace",
        "insert",
        "undo_edit",
    ]
    assert editor["properties"]["view_range"]["items"] == {"type": "integer"}


@pytest.mark.e2e
async def test_tools_work_over_stdio_and_errors_are_flagged(clients, tmp_path):
    await connect_stdio(clients, tmp_path)
    ws = tmp_path / "ws"
    created = await clients.execute(
        name="mcp_openmanus_str_replace_editor",
        tool_input={"command": "create", "path": "notes.txt", "file_text": "alpha\n"},
    )
    assert not isinstance(created, ToolFailure)
    assert (ws / "notes.txt").read_text() == "alpha\n"

    shell = await clients.execute(
        name="mcp_openmanus_bash", tool_input={"command": "cat notes.txt; pwd"}
    )
    assert shell.output.splitlines() == ["alpha", str(ws)]

    code = await clients.execute(
        name="mcp_openmanus_python_execute", tool_input={"code": "print(6 * 7)"}
    )
    assert code.structured_content == {"observation": "42", "success": True}

    outside = await clients.execute(
        name="mcp_openmanus_str_replace_editor",
        tool_input={"command": "view", "path": "/etc/passwd"},
    )
    assert isinstance(outside, ToolFailure) and "outside the allowed locations" in outside.error

    done = await clients.execute(name="mcp_openmanus_terminate", tool_input={"status": "success"})
    assert "success" in done.output

    # Leaving the session stops the server, which stops what its bash session started.
    started = await clients.execute(
        name="mcp_openmanus_bash", tool_input={"command": "tail -f /dev/null & echo $!"}
    )
    child = int(started.output.split()[0])
    assert alive(child)
    await clients.disconnect()
    assert not alive(child)


@pytest.mark.e2e
async def test_http_transport_and_cleanup_on_exit(clients, tmp_path):
    args = [*SERVER, "--transport", "http", "--port", "0", "--workspace", str(tmp_path / "ws")]
    with http_server(args, tmp_path) as (proc, url):
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
        await clients.connect_http(url)
        # A background child of the server's bash session must not outlive the server.
        started = await clients.execute(
            name="mcp_openmanus_bash", tool_input={"command": "tail -f /dev/null & echo $!"}
        )
        child = int(started.output.split()[0])
        assert alive(child)
        await clients.disconnect()
        assert stop(proc) == 0
    assert not alive(child)


@pytest.mark.e2e
async def test_sse_transport(clients, tmp_path):
    args = [*SERVER, "--transport", "sse", "--port", "0", "--workspace", str(tmp_path / "ws")]
    with http_server(args, tmp_path) as (_proc, url):
        assert url.endswith("/sse")
        await clients.connect_sse(url, "sse")
        result = await clients.execute(name="mcp_sse_bash", tool_input={"command": "echo via sse"})
        assert result.output.strip() == "via sse"


@pytest.mark.e2e
def test_non_loopback_host_needs_allow_remote(tmp_path):
    proc = subprocess.run(
        [sys.executable, *SERVER, "--transport", "http", "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        env=child_env(tmp_path),
        timeout=60,
    )
    assert proc.returncode == 2
    assert "refusing to serve bash and python_execute on 0.0.0.0" in proc.stderr
    assert "--allow-remote" in proc.stderr


@pytest.mark.e2e
async def test_run_task_delegates_to_a_manus_agent(clients, tmp_path):
    with ScriptedLLMServer() as llm:
        llm.push(text("The answer is 42."))
        config = write_config(tmp_path, llm.base_url)
        names = await connect_stdio(clients, tmp_path, "--run-task", "--config", str(config))
        assert "mcp_openmanus_run_task" in names
        schema = clients.get_tool("mcp_openmanus_run_task").parameters
        assert schema["required"] == ["task"]
        result = await clients.execute(
            name="mcp_openmanus_run_task", tool_input={"task": "What is six times seven?"}
        )
        assert result.output == "The answer is 42."
        asked = llm.requests[0].body["messages"]
        assert any(
            m["role"] == "user" and m["content"] == "What is six times seven?" for m in asked
        )

        empty = await clients.execute(name="mcp_openmanus_run_task", tool_input={"task": " "})
        assert isinstance(empty, ToolFailure) and "non-empty" in empty.error


@pytest.mark.e2e
def test_sigterm_with_stdin_still_open_cleans_up_and_exits(tmp_path):
    """A client that signals instead of closing stdin (or Ctrl-C in a terminal) still gets a
    prompt exit, and the shell's background jobs are stopped."""
    import json

    proc = subprocess.Popen(
        [sys.executable, *SERVER, "--workspace", str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=child_env(tmp_path),
        text=True,
    )
    try:

        def send(message: dict) -> None:
            proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
            proc.stdin.flush()

        send(
            {
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "test", "version": "1"},
                },
            }
        )
        assert json.loads(proc.stdout.readline())["id"] == 1
        send({"method": "notifications/initialized"})
        send(
            {
                "id": 2,
                "method": "tools/call",
                "params": {"name": "bash", "arguments": {"command": "tail -f /dev/null & echo $!"}},
            }
        )
        reply = json.loads(proc.stdout.readline())
        child = int(reply["result"]["content"][0]["text"].split()[0])
        assert alive(child)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
        assert not alive(child)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdin.close()
        proc.stdout.close()


@pytest.mark.browser
async def test_browser_is_closed_when_the_server_exits(clients, tmp_path):
    pytest.importorskip("browser_use")  # the browser extra
    with WebServer() as web, isolated_tempdir() as temp:  # checks: no files, no processes left
        web.html("/page", "<html><head><title>Served over MCP</title></head><body>hi</body></html>")
        env = {**guarded_env(), "TMPDIR": str(temp)}
        args = [*SERVER, "--workspace", str(tmp_path / "ws")]
        names = await clients.connect_stdio(sys.executable, args, env=env)
        assert "mcp_openmanus_browser_use" in names
        result = await clients.execute(
            name="mcp_openmanus_browser_use",
            tool_input={"action": "go_to_url", "url": web.url + "/page"},
        )
        assert not isinstance(result, ToolFailure), result
        assert processes_mentioning(str(temp)), "Chromium should be running for the server"
        await clients.disconnect()  # closes stdin: the server stops its browser and exits


@pytest.mark.e2e
async def test_code_failures_are_flagged_and_unknown_tools_rejected(clients, tmp_path):
    await connect_stdio(clients, tmp_path)
    crash = await clients.execute(
        name="mcp_openmanus_python_execute", tool_input={"code": "raise KeyError('gone')"}
    )
    assert isinstance(crash, ToolFailure)  # the server set isError
    assert "KeyError: 'gone'" in crash.error
    assert crash.structured_content["success"] is False
    slow = await clients.execute(
        name="mcp_openmanus_python_execute",
        tool_input={"code": "import threading; threading.Event().wait()", "timeout": 1},
    )
    assert isinstance(slow, ToolFailure) and "timed out" in slow.error.lower()
    # A name the server does not have is a protocol error (-32602), not a tool result.
    connection = clients.connections["openmanus"]
    from app.exceptions import ToolError

    with pytest.raises(ToolError, match="Unknown tool: 'no_such_tool'"):
        await connection.call_tool("no_such_tool", {})


@pytest.mark.e2e
async def test_our_server_gets_workspace_and_config_without_our_environment(tmp_path):
    """Started as upstream's run_mcp does (no inherited environment, no --workspace), our
    own server still works in the client's workspace."""
    from app.tool.mcp_features import MCPClientFeatures

    ws = tmp_path / "client ws"
    clients = MCPClients(connect_timeout=30, features=MCPClientFeatures(workspace=ws))
    try:
        await clients.connect_stdio(sys.executable, SERVER, env=guarded_env())
        args = clients.connections["openmanus"].config.args
        assert args[args.index("--workspace") + 1] == str(ws.resolve())
        shell = await clients.execute(name="mcp_openmanus_bash", tool_input={"command": "pwd"})
        assert shell.output.strip() == str(ws.resolve())
    finally:
        await clients.disconnect()


@pytest.mark.e2e
async def test_a_tool_result_leaves_without_the_registered_secrets(tmp_path):
    """What a client gets back (text and structured content) has no registered secret in
    any encoding, as the agent's own model gets it; other code stays as written."""
    from app.logger import register_secret
    from tests.hostile_model import KEY, encoded, leaks

    register_secret(KEY)
    server = MCPServer(workspace=tmp_path)
    try:
        code = f"print({KEY!r}); print({encoded()!r}); print('password = input()')"
        result = await server.call_tool("python_execute", {"code": code})
    finally:
        await server.cleanup()
    shown = result.content[0].text
    assert "password = input()" in shown and "***" in shown
    assert not leaks(shown) and not leaks(str(result.structured_content)), shown
