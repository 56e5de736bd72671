"""Our MCP server checked by the official MCP Inspector CLI (``mcp-inspector --cli``, npm,
installed by scripts/setup-npm-tools.sh), over stdio and streamable HTTP on 127.0.0.1."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.mcp.server import MCPServer
from tests.mcp_helpers import ROOT, child_env, guarded_env, http_server
from tests.npm_tools import node_env, npm_bin

pytestmark = pytest.mark.e2e

SERVER = ["-m", "app.mcp.server"]


@pytest.fixture(scope="module", params=["stdio", "http"])
def target(request, tmp_path_factory) -> Iterator[tuple[list[str], Path]]:
    """The Inspector's arguments that reach our server, and the server's workspace."""
    tmp = tmp_path_factory.mktemp(f"inspector_{request.param}")
    ws = tmp / "ws"
    if request.param == "stdio":
        env = [part for k, v in guarded_env().items() for part in ("-e", f"{k}={v}")]
        yield [*env, sys.executable, *SERVER, "--workspace", str(ws)], ws
        return
    args = [*SERVER, "--transport", "http", "--port", "0", "--workspace", str(ws)]
    with http_server(args, tmp) as (_proc, url):
        assert url.startswith("http://127.0.0.1:")
        yield [url, "--transport", "http"], ws


def inspect(target: tuple[list[str], Path], *args: str) -> subprocess.CompletedProcess[str]:
    reach, ws = target
    env = node_env(HOME=str(ws.parent), PYTHONPATH=child_env(ws.parent)["PYTHONPATH"])
    return subprocess.run(
        # The target first: --tool-arg takes every value after it.
        [str(npm_bin("mcp-inspector")), "--cli", *reach, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def call(target, tool: str, **arguments: str) -> dict:
    args = ["--method", "tools/call", "--tool-name", tool]
    for key, value in arguments.items():
        args += ["--tool-arg", f"{key}={value}"]
    proc = inspect(target, *args)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_tools_list_has_our_exact_schemas(target):
    proc = inspect(target, "--method", "tools/list")
    assert proc.returncode == 0, proc.stderr
    listed = {tool["name"]: tool for tool in json.loads(proc.stdout)["tools"]}
    local = {tool.name: tool for tool in MCPServer.default_tools(target[1])}
    assert set(listed) == set(local)
    for name, tool in local.items():
        assert listed[name]["inputSchema"] == tool.parameters, name
        assert listed[name]["description"] == tool.description


def test_tools_call_works_and_failures_set_is_error(target):
    ws = target[1]
    created = call(
        target,
        "str_replace_editor",
        command="create",
        path="hello.py",
        file_text="print('hi from the inspector')",
    )
    assert created["isError"] is False
    assert (ws / "hello.py").read_text() == "print('hi from the inspector')"

    shell = call(target, "bash", command="python3 hello.py && pwd")
    assert shell["isError"] is False
    assert shell["content"][0]["text"].split() == ["hi", "from", "the", "inspector", str(ws)]

    code = call(target, "python_execute", code="print(6 * 7)")
    assert code["isError"] is False
    assert code["structuredContent"] == {"observation": "42", "success": True}

    crash = call(target, "python_execute", code="raise ValueError('boom')")
    assert crash["isError"] is True
    assert "ValueError: boom" in crash["structuredContent"]["observation"]

    bad = call(target, "python_execute", code="print(1)", timeout="-5")
    assert bad["isError"] is True and "positive number" in bad["content"][0]["text"]

    missing = call(target, "str_replace_editor", command="view")
    assert missing["isError"] is True and "path" in missing["content"][0]["text"]


def test_unknown_tool_is_a_json_rpc_invalid_params_error(target):
    proc = inspect(target, "--method", "tools/call", "--tool-name", "no_such_tool")
    assert proc.returncode != 0
    assert "MCP error -32602: Unknown tool: 'no_such_tool'" in proc.stderr + proc.stdout
