"""MCPClients against real MCP server subprocesses (stdio and streamable HTTP)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys

import pytest
import pytest_asyncio

from app.config import MCPServerConfig
from app.exceptions import MCPServerError
from app.tool.base import ToolFailure
from app.tool.mcp import MCPClients, MCPClientTool, MCPToolFailure, MCPToolResult, tool_name
from tests.mcp_helpers import DEMO, PNG_B64, demo_config, http_server

pytestmark = pytest.mark.e2e

DEMO_TOOLS = {"echo", "add", "fail", "picture", "pid", "slow", "grow"}


@pytest.fixture
async def clients():
    collection = MCPClients(connect_timeout=20)
    try:
        yield collection
    finally:
        await collection.disconnect()


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def shared():
    """One demo server for the tests that only call tools (starting one costs ~1 s)."""
    collection = MCPClients(connect_timeout=20)
    await collection.connect("demo", demo_config())
    try:
        yield collection
    finally:
        await collection.disconnect()


on_shared_loop = pytest.mark.asyncio(loop_scope="module")


def test_tool_names_are_safe_short_and_unique():
    assert tool_name("demo", "echo") == "mcp_demo_echo"
    assert tool_name("my server.v2", "read/file") == "mcp_my_server_v2_read_file"
    long_name = tool_name("s" * 40, "t" * 40)
    assert len(long_name) == 64 and long_name.startswith("mcp_sss")
    taken = {long_name}
    second = tool_name("s" * 40, "t" * 40, taken)
    assert second != long_name and len(second) == 64 and second.endswith("_2")
    taken.add(second)
    assert tool_name("s" * 40, "t" * 40, taken).endswith("_3")


@on_shared_loop
async def test_stdio_list_and_call(shared):
    clients = shared
    names = [t.name for t in clients if t.name != "mcp_demo_extra"]
    assert set(names) == {f"mcp_demo_{n}" for n in DEMO_TOOLS}
    echo = clients.get_tool("mcp_demo_echo")
    assert isinstance(echo, MCPClientTool) and echo.original_name == "echo"
    assert echo.parameters["properties"]["text"]["type"] == "string"
    assert echo.parameters["required"] == ["text"]
    assert clients.sessions["demo"] is echo.session is not None
    # the server's read-only hint lets calls run concurrently; others stay in order
    assert echo.concurrency_safe and not clients.get_tool("mcp_demo_add").concurrency_safe

    result = await clients.execute(name="mcp_demo_echo", tool_input={"text": "héllo"})
    assert isinstance(result, MCPToolResult) and result.output == "héllo"

    added = await clients.execute(name="mcp_demo_add", tool_input={"a": 2, "b": 3})
    assert added.output == "5" and added.structured_content == {"result": 5}


@on_shared_loop
async def test_is_error_result_is_a_failure(shared):
    clients = shared
    result = await clients.execute(name="mcp_demo_fail", tool_input={"reason": "no luck"})
    assert isinstance(result, MCPToolFailure) and isinstance(result, ToolFailure)
    assert "failed on purpose: no luck" in result.error
    # Arguments are checked against the server's schema before the call is sent.
    bad = await clients.execute(name="mcp_demo_add", tool_input={"a": "two", "b": 3, "c": 1})
    assert isinstance(bad, ToolFailure) and bad.error.splitlines()[1:] == [
        '- a: expected integer, got string "two"',
        "- c: unknown argument (allowed: a, b)",
    ]
    coerced = await clients.execute(name="mcp_demo_add", tool_input={"a": "2", "b": 3})
    assert coerced.output == "5"


@on_shared_loop
async def test_image_result_becomes_base64_image(shared):
    clients = shared
    result = await clients.execute(name="mcp_demo_picture", tool_input={})
    assert result.base64_image == PNG_B64
    assert not isinstance(result, ToolFailure)


async def test_call_timeout_keeps_the_connection(clients):
    await clients.connect("demo", demo_config(timeout=0.5))
    result = await clients.execute(name="mcp_demo_slow", tool_input={"seconds": 30})
    assert isinstance(result, ToolFailure)
    assert "did not answer 'slow' within 0.5 s" in result.error
    again = await clients.execute(name="mcp_demo_echo", tool_input={"text": "still here"})
    assert again.output == "still here"


async def test_server_killed_mid_session_reports_then_restarts(clients):
    await clients.connect("demo", demo_config())
    first_pid = int((await clients.execute(name="mcp_demo_pid", tool_input={})).output)

    pending = asyncio.ensure_future(
        clients.execute(name="mcp_demo_slow", tool_input={"seconds": 60})
    )
    os.kill(first_pid, signal.SIGKILL)
    lost = await asyncio.wait_for(pending, 30)
    assert isinstance(lost, ToolFailure)
    assert "MCP server 'demo'" in lost.error and "connection was lost" in lost.error
    assert "restarted on the next call" in lost.error

    second_pid = int((await clients.execute(name="mcp_demo_pid", tool_input={})).output)
    assert second_pid != first_pid
    assert "mcp_demo_echo" in clients.tool_map


async def test_server_that_cannot_restart_loses_its_tools(clients, tmp_path):
    script = tmp_path / "server.py"
    script.write_text(DEMO.read_text(encoding="utf-8"), encoding="utf-8")
    await clients.connect("demo", demo_config(args=[str(script)]))
    pid = int((await clients.execute(name="mcp_demo_pid", tool_input={})).output)
    script.unlink()  # the restart will fail
    os.kill(pid, signal.SIGKILL)

    lost = await clients.execute(name="mcp_demo_echo", tool_input={"text": "x"})
    assert isinstance(lost, ToolFailure) and "connection was lost" in lost.error
    unreachable = await clients.execute(name="mcp_demo_echo", tool_input={"text": "x"})
    assert isinstance(unreachable, ToolFailure)
    assert "could not be used" in unreachable.error and "server.py" in unreachable.error
    assert "unavailable until the server can be reached again" in unreachable.error
    assert not any(name.startswith("mcp_demo_") for name in clients.tool_map)

    # Once the server can start again, a refresh brings the tools back.
    script.write_text(DEMO.read_text(encoding="utf-8"), encoding="utf-8")
    changes = await clients.refresh()
    assert "mcp_demo_echo" in changes.added and "mcp_demo_echo" in clients.tool_map


async def test_streamable_http_list_call_and_kill(clients, tmp_path):
    with http_server([str(DEMO), "--http"], tmp_path) as (proc, url):
        names = await clients.connect_http(url, "web")
        assert "mcp_web_echo" in names
        result = await clients.execute(name="mcp_web_echo", tool_input={"text": "over http"})
        assert result.output == "over http"
        picture = await clients.execute(name="mcp_web_picture", tool_input={})
        assert picture.base64_image == PNG_B64
        failed = await clients.execute(name="mcp_web_fail", tool_input={"reason": "http"})
        assert isinstance(failed, ToolFailure) and "failed on purpose: http" in failed.error

        proc.kill()
        proc.wait()
        first = await clients.execute(name="mcp_web_echo", tool_input={"text": "anyone?"})
        assert isinstance(first, ToolFailure) and "MCP server 'web'" in first.error
        if "connection was lost" in first.error:  # noticed on this call; the next retries
            first = await clients.execute(name="mcp_web_echo", tool_input={"text": "anyone?"})
        assert "could not be used" in first.error and url in first.error
        assert "mcp_web_echo" not in clients.tool_map


async def test_server_that_never_starts(clients):
    with pytest.raises(MCPServerError, match="command not found: 'no-such-mcp-server'"):
        await clients.connect("ghost", MCPServerConfig(type="stdio", command="no-such-mcp-server"))

    crash = MCPServerConfig(
        type="stdio",
        command=sys.executable,
        args=["-c", "import sys; sys.stderr.write('missing API token\\n'); sys.exit(3)"],
    )
    with pytest.raises(MCPServerError) as info:
        await clients.connect("crash", crash)
    message = str(info.value)
    assert "MCP server 'crash'" in message and "exited" in message
    assert "missing API token" in message  # the server's own explanation is kept

    with pytest.raises(MCPServerError, match="could not be used"):
        await clients.connect_http("http://127.0.0.1:9/mcp", "closed-port")
    assert clients.connections == {} and len(clients) == 0


async def test_silent_server_times_out_on_the_handshake():
    collection = MCPClients(connect_timeout=1)
    mute = MCPServerConfig(
        type="stdio", command=sys.executable, args=["-c", "import sys; sys.stdin.read()"]
    )
    with pytest.raises(MCPServerError, match="did not complete the handshake within 1 s"):
        await collection.connect("mute", mute)


async def test_connect_all_reports_failures_and_keeps_the_rest(clients):
    failures = await clients.connect_all(
        {
            "demo": demo_config(),
            "ghost": MCPServerConfig(type="stdio", command="no-such-mcp-server"),
        }
    )
    assert list(failures) == ["ghost"] and "command not found" in failures["ghost"]
    assert "mcp_demo_echo" in clients.tool_map


@on_shared_loop
async def test_sessions_belong_to_instances(shared):
    clients = shared
    other = MCPClients()
    assert other.connections == {} and other.sessions == {} and len(other) == 0
    assert clients.sessions and clients.tools is not other.tools


async def test_default_server_id_is_the_servers_name(clients):
    names = await clients.connect_stdio(sys.executable, [str(DEMO)], env=demo_config().env)
    assert "mcp_demo_echo" in names and list(clients.connections) == ["demo"]


async def test_close_keeps_tools_which_reconnect(clients):
    await clients.connect("demo", demo_config())
    first = (await clients.execute(name="mcp_demo_pid", tool_input={})).output
    await clients.close()
    assert clients.sessions == {} and "mcp_demo_pid" in clients.tool_map
    second = (await clients.execute(name="mcp_demo_pid", tool_input={})).output
    assert second != first


@on_shared_loop
async def test_list_changed_notification_and_refresh(shared):
    clients = shared
    assert not clients.tools_changed
    await clients.execute(name="mcp_demo_grow", tool_input={})
    await asyncio.wait_for(clients.wait_for_tools_change(), 10)
    assert clients.tools_changed
    changes = await clients.refresh()
    assert changes.added == ["mcp_demo_extra"] and not changes.removed
    extra = await clients.execute(name="mcp_demo_extra", tool_input={})
    assert extra.output == "extra!"
    assert not clients.tools_changed


def test_mcp_json_errors_name_the_server_and_key(tmp_path):
    from app.config import load_config
    from app.exceptions import ConfigError

    (tmp_path / "config.toml").write_text('[llm]\nmodel = "m"\n', encoding="utf-8")
    (tmp_path / "mcp.json").write_text(
        '{"mcpServers": {"slowpoke": {"command": "x", "timeout": -1},'
        ' "web": {"type": "http"}, "ok": {"url": "http://127.0.0.1:1/sse", "timeout": 5}}}',
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "config.toml")
    message = str(info.value)
    assert "mcpServers.slowpoke.timeout" in message and "greater than 0" in message
    assert "mcpServers.web" in message and '"http" server needs "url"' in message
    assert "mcpServers.ok" not in message


def test_embedded_resources_and_links_keep_what_the_model_needs():
    import base64

    from mcp import types

    from app.tool.mcp import MAX_EMBEDDED_TEXT, convert_result

    def blob(data: bytes, mime: str | None) -> types.EmbeddedResource:
        return types.EmbeddedResource(
            type="resource",
            resource=types.BlobResourceContents(
                uri="file:///x", mime_type=mime, blob=base64.b64encode(data).decode()
            ),
        )

    result = convert_result(
        types.CallToolResult(
            content=[
                blob('{"a": "é"}'.encode(), "application/json"),
                blob(b"\xff\xfe bad utf-8", "text/plain; charset=utf-8"),
                blob(b"\x00\x01\x02", "application/octet-stream"),
                types.ResourceLink(
                    type="resource_link",
                    uri="file:///r.csv",
                    name="r.csv",
                    description="The report",
                    mime_type="text/csv",
                    size=12,
                ),
            ]
        )
    )
    lines = result.output.splitlines()
    assert lines[:2] == ["[embedded resource file:///x (application/json)]", '{"a": "é"}']
    assert lines[3] == "\ufffd\ufffd bad utf-8"  # decoded with replacement, never a crash
    assert "[embedded resource file:///x (application/octet-stream, 3 bytes) not shown]" in lines
    assert lines[-1] == "[resource link: r.csv <file:///r.csv> (text/csv, 12 bytes) — The report]"

    # A hostile server's huge text blob is cut, not decoded whole.
    huge = convert_result(types.CallToolResult(content=[blob(b"x" * 10_000_000, "text/plain")]))
    assert len(huge.output) < MAX_EMBEDDED_TEXT + 200
    assert huge.output.endswith("more characters not shown]")


def test_elicitation_answers_are_checked_against_the_schema():
    from mcp.types import ElicitResult

    from app.tool.mcp_features import parse_answer

    schema = {
        "type": "object",
        "required": ["age"],
        "properties": {
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
            "color": {"type": "string", "enum": ["red", "blue"], "default": "red"},
            "ok": {"type": "boolean"},
        },
    }
    assert parse_answer('{"age": 30, "ok": true}', schema) == ElicitResult(
        action="accept", content={"age": 30, "ok": True, "color": "red"}
    )
    assert parse_answer('{"age": 200}', schema) == "'age' must be at most 150."
    assert parse_answer('{"age": "30"}', schema) == "'age' must be an integer."
    assert parse_answer('{"color": "green"}', schema) == (
        "'age' is required; 'color' must be one of red, blue."
    )
    assert parse_answer('{"age": 1, "admin": true}', schema) == "unknown field(s): admin."
    assert parse_answer("30", schema).startswith("This form has several fields")
    assert parse_answer("{not json", schema).startswith("That is not valid JSON")
    assert parse_answer("decline", schema) == ElicitResult(action="decline")
    assert parse_answer("", schema) == ElicitResult(action="cancel")
    assert parse_answer(None, schema) == ElicitResult(action="cancel")
    one = {"type": "object", "properties": {"n": {"type": "number"}}, "required": ["n"]}
    assert parse_answer("2.5", one) == ElicitResult(action="accept", content={"n": 2.5})
