"""Upstream-style programs (main, run_flow, run_mcp, run_mcp_server, sandbox_main) with
upstream's exact import lines and call sequence, run against the scripted server."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.testing import call, text, tool_calls
from tests.mcp_helpers import DEMO, guarded_env
from tests.test_main_e2e import TEST_API_KEY, child_env

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = ROOT / "tests" / "upstream_programs"


# --- upstream-style programs against the scripted server -------------------------------------


def write_upstream_config(tmp_path: Path, base_url: str, extra: str = "") -> Path:
    directory = tmp_path / "config"
    directory.mkdir(exist_ok=True)
    path = directory / "config.toml"
    path.write_text(
        f'workspace_root = "{tmp_path / "ws"}"\n[llm]\nmodel = "gpt-4o-mini"\n'
        f'base_url = "{base_url}"\napi_key = "{TEST_API_KEY}"\nmax_retries = 0\ntimeout = 30\n'
        + extra
    )
    return path


def run_program(
    tmp_path: Path,
    config: Path,
    name: str,
    *args: str,
    stdin: str | None = None,
    cwd: Path | None = None,
):
    env = child_env(tmp_path)
    env["OPENMANUS_CONFIG"] = str(config)  # upstream programs take no --config
    return subprocess.run(
        [sys.executable, str(PROGRAMS / name), *args],
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd or tmp_path,
        timeout=120,
    )


def test_upstream_main(tmp_path: Path, llm_server) -> None:
    llm_server.push(
        tool_calls(
            call(
                "str_replace_editor",
                {"command": "create", "path": "hello.txt", "file_text": "hi from upstream main\n"},
            )
        ),
        tool_calls(call("terminate", {"status": "success"}), content="done"),
    )
    config = write_upstream_config(tmp_path, llm_server.base_url)
    proc = run_program(tmp_path, config, "main.py", "--prompt", "write hello.txt")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "ws" / "hello.txt").read_text() == "hi from upstream main\n"
    assert len(llm_server.requests) == 2


def test_upstream_run_flow_with_manus_built_directly_uses_mcp_json(tmp_path, llm_server) -> None:
    llm_server.push(
        tool_calls(
            call(
                "planning",
                {
                    "command": "create",
                    "plan_id": "p",
                    "title": "Sum",
                    "steps": ["Add 2 and 3 with the demo server"],
                },
            )
        ),
        tool_calls(call("mcp_demo_add", {"a": 2, "b": 3})),
        tool_calls(call("terminate", {"status": "success"}), content="The sum is 5"),
        text("The demo server says 2 + 3 = 5."),
    )
    config = write_upstream_config(tmp_path, llm_server.base_url)
    (config.parent / "mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "demo": {
                        "type": "stdio",
                        "command": sys.executable,
                        "args": [str(DEMO)],
                        "env": guarded_env(),
                    }
                }
            }
        )
    )
    proc = run_program(tmp_path, config, "run_flow.py", stdin="add 2 and 3\n")
    assert proc.returncode == 0, proc.stderr
    assert "The demo server says 2 + 3 = 5." in proc.stdout
    # Manus() connected mcp.json's server on its first step: the executor was offered its
    # tools from that first request on, and the call reached the server.
    step_request = llm_server.requests[1]
    assert "mcp_demo_add" in {t["function"]["name"] for t in step_request.tools}
    results = [m["content"] for m in llm_server.requests[2].messages if m["role"] == "tool"]
    assert any("5" in str(r) for r in results), results


def test_upstream_run_mcp_spawns_the_server_reference(tmp_path: Path, llm_server) -> None:
    # The server is spawned as ``python -m app.mcp.server`` with the MCP SDK's default
    # environment (as upstream did), so it reads the project's default config, not ours:
    # the command only prints, it writes nothing into whatever workspace that is.
    llm_server.push(
        tool_calls(call("mcp_openmanus_bash", {"command": "echo via upstream run_mcp"})),
        tool_calls(call("mcp_openmanus_terminate", {"status": "success"}), content="ok"),
    )
    config = write_upstream_config(tmp_path, llm_server.base_url)
    proc = run_program(tmp_path, config, "run_mcp.py", "-p", "say hi", cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "AGENT RESULT:" in proc.stdout
    offered = {t["function"]["name"] for t in llm_server.requests[0].tools}
    assert {"mcp_openmanus_bash", "mcp_openmanus_terminate"} <= offered
    results = [m["content"] for m in llm_server.requests[1].messages if m["role"] == "tool"]
    assert "via upstream run_mcp" in str(results[-1]), results


def test_upstream_run_mcp_server_serves_our_tools_over_stdio(tmp_path: Path) -> None:
    from app.config import MCPServerConfig
    from app.tool.mcp import MCPClients

    config = write_upstream_config(tmp_path, "http://127.0.0.1:9/v1")
    env = child_env(tmp_path)
    env["OPENMANUS_CONFIG"] = str(config)
    server = MCPServerConfig(
        type="stdio",
        command=sys.executable,
        args=[str(PROGRAMS / "run_mcp_server.py"), "--transport", "stdio"],
        env=env,
    )

    async def scenario() -> tuple[set[str], str]:
        clients = MCPClients()
        try:
            failures = await clients.connect_all({"srv": server})
            assert not failures, failures
            names = set(clients.tool_map)
            result = await clients.execute(
                name="mcp_srv_bash", tool_input={"command": "echo served > s.txt; pwd"}
            )
            return names, str(result)
        finally:
            await clients.close()

    names, output = asyncio.run(scenario())
    assert {"mcp_srv_bash", "mcp_srv_str_replace_editor", "mcp_srv_terminate"} <= names
    assert (tmp_path / "ws" / "s.txt").read_text() == "served\n"
    assert str(tmp_path / "ws") in output


def test_upstream_sandbox_main_runs_code_in_an_isolating_backend(tmp_path, llm_server) -> None:
    import shutil

    if shutil.which("bwrap") is None:
        pytest.skip("bwrap is not installed (scripts/test.sh installs it)")
    llm_server.push(
        tool_calls(call("bash", {"command": "cat /proc/1/comm; touch made.txt"})),
        tool_calls(call("terminate", {"status": "success"}), content="done"),
    )
    config = write_upstream_config(
        tmp_path, llm_server.base_url, '[sandbox]\nbackend = "bubblewrap"\n'
    )
    proc = run_program(tmp_path, config, "sandbox_main.py", "--prompt", "go")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "ws" / "made.txt").is_file()
    bash_result = [m["content"] for m in llm_server.requests[1].messages if m["role"] == "tool"]
    # In bubblewrap's PID namespace, PID 1 is bwrap's init, not the host's init.
    assert bash_result and "systemd" not in str(bash_result[-1]), bash_result


def test_sandbox_manus_never_runs_code_unconfined(monkeypatch, tmp_path: Path) -> None:
    from app.compat.agent.sandbox_agent import isolating_backend
    from app.config import AppConfig, LLMSettings, SandboxSettings, config

    for configured, expected in (
        ("local", "docker"),
        ("bubblewrap", "bubblewrap"),
        ("docker", "docker"),
    ):
        config.use(
            AppConfig(llm=LLMSettings(model="m"), sandbox=SandboxSettings(backend=configured))
        )
        try:
            assert isolating_backend() == expected
        finally:
            config.reset()
