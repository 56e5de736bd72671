"""Using OpenManus as a new user would: the example config with our own MCP server in
``mcp.json``, the package as a quiet library, our programs still logging, and the local
sandbox's network notice said once, only to a user who asked for no network."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from app.testing import ScriptedLLMServer, call, load_script, tool_calls
from tests.conftest import TEST_API_KEY
from tests.test_main_e2e import child_env, run_main, write_config

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent
NETWORK_NOTICE = "sandbox backend 'local' cannot block network access"


def _python(tmp_path: Path, code: str, env: dict[str, str], timeout: float = 120):
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=timeout,
        check=False,
    )


def _example_config_dir(tmp_path: Path) -> Path:
    """config.example.toml as a user copies it, and an mcp.json naming our own server."""
    directory = tmp_path / "config"
    directory.mkdir()
    shutil.copy(ROOT / "config" / "config.example.toml", directory / "config.toml")
    server = {"type": "stdio", "command": sys.executable, "args": ["-m", "app.mcp.server"]}
    (directory / "mcp.json").write_text(json.dumps({"mcpServers": {"openmanus": server}}))
    return directory / "config.toml"


# --- our own MCP server, started by Manus from mcp.json ------------------------------------------


def test_manus_gets_our_servers_tools_with_the_example_config(tmp_path: Path) -> None:
    """The example reads the key from $OPENAI_API_KEY; the agent has it, the server child
    Manus starts gets no environment but needs no model, so it starts and lists its tools."""
    config_file = _example_config_dir(tmp_path)
    env = child_env(tmp_path)
    env.update(
        OPENMANUS_CONFIG=str(config_file),
        OPENAI_API_KEY="dummy-key-for-the-agent-only",
        OPENMANUS_WORKSPACE=str(tmp_path / "ws"),
    )
    code = (
        "import asyncio\n"
        "from app.agent.manus import Manus\n"
        "async def main():\n"
        "    agent = await Manus.create()\n"
        "    try:\n"
        "        print(sorted(agent.available_tools.tool_map))\n"
        "        print('failures', dict(agent.mcp_failures))\n"
        "    finally:\n"
        "        await agent.cleanup()\n"
        "asyncio.run(main())\n"
    )
    result = _python(tmp_path, code, env)
    assert result.returncode == 0, result.stderr
    assert "failures {}" in result.stdout, result.stdout + result.stderr
    for tool in ("bash", "python_execute", "str_replace_editor", "terminate"):
        assert f"'mcp_openmanus_{tool}'" in result.stdout


def test_run_task_needs_the_model_and_says_which_variable(tmp_path: Path) -> None:
    """With --run-task the model is needed: an unset key is one readable error, at start."""
    config_file = _example_config_dir(tmp_path)
    env = child_env(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "app.mcp.server", "--config", str(config_file), "--run-task"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "environment variable OPENAI_API_KEY is not set" in result.stderr
    assert "Traceback" not in result.stderr


# --- a library is quiet; our programs are not ---------------------------------------------------


def test_using_the_library_prints_nothing_to_stderr(tmp_path: Path, llm_server) -> None:
    """A whole Manus run (a tool call, usage accounting) in a fresh interpreter: nothing on
    stderr until the application turns logging on; a handler it adds gets our records."""
    llm_server.push(tool_calls(call("python_execute", {"code": "print(6 * 7)"})))
    llm_server.push(tool_calls(call("terminate", {"status": "success"})))
    code = (
        "import asyncio, sys\n"
        "import app.agent.manus\n"
        "from app.agent.manus import Manus\n"
        "from app.config import LLMSettings, config\n"
        f"config.use(LLMSettings(model='m', base_url={llm_server.base_url!r}, "
        "api_key='dummy-library-key', max_retries=0))\n"
        "async def main():\n"
        "    agent = await Manus.create()\n"
        "    try:\n"
        "        await agent.run('compute')\n"
        "    finally:\n"
        "        await agent.cleanup()\n"
        "asyncio.run(main())\n"
        "print('ran', flush=True)\n"
    )
    env = child_env(tmp_path)
    env["OPENMANUS_WORKSPACE"] = str(tmp_path / "ws")
    result = _python(tmp_path, code, env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ran"
    assert result.stderr == ""
    assert len(llm_server.requests) == 2  # the run did happen


def test_main_py_still_logs(tmp_path: Path, llm_server: ScriptedLLMServer) -> None:
    llm_server.push(tool_calls(call("terminate", {"status": "success"})))
    config_file = write_config(tmp_path, llm_server.base_url)
    proc = run_main(tmp_path, "--config", str(config_file), "-p", "finish")
    assert proc.returncode == 0, proc.stderr
    assert "Executing step 1/" in proc.stderr


# --- the local backend's network notice ---------------------------------------------------------


def _sandbox_runs(tmp_path: Path, settings: str) -> subprocess.CompletedProcess[str]:
    """Three local sandboxes in one process (as three tools would), each running a command,
    with our programs' logging on."""
    code = (
        "import asyncio\n"
        "from app.config import SandboxSettings\n"
        "from app.logger import define_log_level\n"
        "from app.sandbox.local import LocalSandbox\n"
        "define_log_level('INFO', 'OFF')\n"
        "async def main():\n"
        "    for n in range(3):\n"
        f"        box = LocalSandbox(SandboxSettings({settings}), {str(tmp_path)!r})\n"
        "        try:\n"
        "            print((await box.run(f'echo run-{n}')).stdout.strip())\n"
        "        finally:\n"
        "            await box.cleanup()\n"
        "asyncio.run(main())\n"
    )
    result = _python(tmp_path, code, child_env(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["run-0", "run-1", "run-2"]
    return result


def test_no_network_notice_when_the_user_asked_for_nothing(tmp_path: Path) -> None:
    assert NETWORK_NOTICE not in _sandbox_runs(tmp_path, "").stderr


def test_network_notice_once_when_the_user_asked_for_no_network(tmp_path: Path) -> None:
    result = _sandbox_runs(tmp_path, "network_enabled=False")
    assert result.stderr.count(NETWORK_NOTICE) == 1


# --- the scripted server's JSON format, as documented -----------------------------------------


def test_the_documented_json_script_drives_main_py(tmp_path: Path) -> None:
    """The example in docs/agents.md is a valid script, and main.py runs it to the end; the
    request log keeps the key the client sent out."""
    page = (ROOT / "docs" / "agents.md").read_text(encoding="utf-8")
    section = page[page.index("### The JSON script format") :]
    example = section[section.index("```json\n") + 8 : section.index("```\n", 8)]
    script = tmp_path / "replies.json"
    script.write_text(example)
    assert [type(r).kind for r in load_script(str(script))] == [
        "tool_calls",
        "error",
        "tool_calls",
        "text",
    ]
    log = tmp_path / "requests.jsonl"
    server = subprocess.Popen(
        [sys.executable, "-m", "app.testing.server", "--script", str(script), "--log", str(log)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(tmp_path),
        cwd=ROOT,
    )
    try:
        assert server.stdout is not None
        base_url = server.stdout.readline().strip()
        config_file = write_config(tmp_path, base_url)  # max_retries = 0 ...
        text = config_file.read_text().replace("max_retries = 0", "max_retries = 1")
        config_file.write_text(text)  # ... but the documented 429 is retried
        proc = run_main(tmp_path, "--config", str(config_file), "-p", "What is 6 * 7?")
        assert proc.returncode == 0, proc.stderr
        assert "Done." in proc.stdout
    finally:
        server.terminate()
        _, stderr = server.communicate(timeout=30)
    assert "3 requests, 1 replies unused" in stderr
    logged = log.read_text()
    assert '"Bearer ***"' in logged and TEST_API_KEY not in logged
