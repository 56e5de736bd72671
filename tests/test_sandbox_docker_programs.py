"""``[sandbox] backend = "docker"`` end to end: a scripted model drives real tool calls
through our programs (main.py's Manus, run_flow.py, the MCP server) and every command runs in a
real container (hostname ``sandbox``, the workspace at ``/workspace``), which is gone when the
program ends. Tier e2e; skipped only where no engine can run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.testing import ScriptedLLMServer, call, text, tool_calls
from app.tool.mcp import MCPClients
from tests.mcp_helpers import http_server
from tests.mcp_helpers import write_config as write_mcp_config
from tests.sandbox_utils import DOCKER_IMAGE, requires_docker
from tests.test_main_e2e import run_main, write_config
from tests.test_run_flow_e2e import run_flow

pytestmark = [pytest.mark.e2e, requires_docker]

DOCKER_SECTION = (
    f'\n[sandbox]\nbackend = "docker"\nimage = "{DOCKER_IMAGE}"\nmemory_limit = "256m"\n'
)
PROBE = "hostname; pwd; echo made > made.txt; test -e /var/run/docker.sock || echo no-socket"


def containers_on(workspace: Path) -> list[str]:
    """Containers (running or not) that mount ``workspace``."""
    import docker

    client = docker.from_env()
    try:
        return [
            c.id
            for c in client.containers.list(all=True, filters={"label": "openmanus.sandbox"})
            if any(m.get("Source") == str(workspace) for m in c.attrs.get("Mounts", []))
        ]
    finally:
        client.close()


def tool_outputs(server: ScriptedLLMServer) -> list[str]:
    """Every tool result the model was sent, once each, in order."""
    seen: list[str] = []
    for request in server.requests:
        for message in request.body["messages"]:
            if message["role"] == "tool" and message["content"] not in seen:
                seen.append(message["content"])
    return seen


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


def test_manus_tools_run_in_a_container(
    tmp_path: Path, workspace: Path, llm_server: ScriptedLLMServer
) -> None:
    llm_server.push(
        tool_calls(call("bash", {"command": PROBE})),
        tool_calls(
            call(
                "str_replace_editor",
                {"command": "create", "path": "/workspace/job.py", "file_text": "print(6 * 7)\n"},
            )
        ),
        tool_calls(
            call(
                "python_execute",
                {
                    "code": "import runpy, socket\n"
                    "print(socket.gethostname())\nrunpy.run_path('job.py')"
                },
            )
        ),
        tool_calls(call("terminate", {"status": "success"}), content="done in the container"),
    )
    cfg = write_config(tmp_path, llm_server.base_url)
    cfg.write_text(cfg.read_text() + DOCKER_SECTION)
    proc = run_main(
        tmp_path, "-p", "look around", "-c", str(cfg), "-w", str(workspace), timeout=180
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "done in the container"
    bash_out, editor_out, python_out = tool_outputs(llm_server)
    assert "sandbox\n/workspace" in bash_out and "no-socket" in bash_out
    assert "/workspace/job.py" in editor_out and "sandbox" in python_out and "42" in python_out
    assert (workspace / "made.txt").read_text() == "made\n"
    assert (workspace / "job.py").read_text() == "print(6 * 7)\n"
    assert containers_on(workspace) == []


def test_run_flow_steps_run_in_a_container(
    tmp_path: Path, workspace: Path, llm_server: ScriptedLLMServer
) -> None:
    llm_server.push(
        tool_calls(
            call(
                "planning",
                {"command": "create", "plan_id": "p", "title": "Probe", "steps": ["[MANUS] Probe"]},
            )
        ),
        tool_calls(call("bash", {"command": PROBE})),
        tool_calls(call("terminate", {"status": "success"}), content="probed"),
        text("Probed the sandbox."),
    )
    cfg = write_config(tmp_path, llm_server.base_url)
    cfg.write_text(cfg.read_text() + DOCKER_SECTION)
    proc = run_flow(tmp_path, "-p", "probe", "-c", str(cfg), "-w", str(workspace), timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "Probed the sandbox."
    bash_out = next(o for o in tool_outputs(llm_server) if "sandbox" in o)
    assert "sandbox\n/workspace" in bash_out and "no-socket" in bash_out
    assert (workspace / "made.txt").read_text() == "made\n"
    assert containers_on(workspace) == []


async def test_the_mcp_server_runs_its_tools_in_a_container(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    cfg = write_mcp_config(tmp_path)
    cfg.write_text(cfg.read_text() + DOCKER_SECTION)
    args = ["-m", "app.mcp.server", "--transport", "http", "--port", "0", "--config", str(cfg)]
    clients = MCPClients(connect_timeout=30)
    with http_server(args, tmp_path) as (_proc, url):
        try:
            await clients.connect_http(url)
            shell = await clients.execute(name="mcp_openmanus_bash", tool_input={"command": PROBE})
            code = await clients.execute(
                name="mcp_openmanus_python_execute",
                tool_input={"code": "import os; print(os.getcwd(), os.uname().nodename)"},
            )
        finally:
            await clients.disconnect()
    assert "sandbox\n/workspace" in shell.output and "no-socket" in shell.output, shell.output
    assert "/workspace sandbox" in json.dumps(code.output), code.output
    assert (workspace / "made.txt").read_text() == "made\n"
    assert containers_on(workspace) == []
