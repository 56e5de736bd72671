"""The behavioural half of tests/test_launch_isolation.py (issue 34, item 1): code the model
plants where our own host-side programs start never runs on the host.

The attack, replayed: the model writes ``app/__init__.py`` (and ``app/sandbox/``,
``app/mcp/``, ``docker/``, ``ray/``, ``sitecustomize.py``, ``usercustomize.py``, a ``.pth``
file) into its workspace with ``bash`` or ``str_replace_editor``, then runs ``python_execute``
and ``bash``, which start our helpers (the docker relay, the launch stub, the reaper, the MCP
server over stdio, Ray's workers). The same files wait in the directory each program is
started from. The planted code appends a line to a file on the host, outside the workspace
(with the agent's API key in its environment, it would have sent it anywhere): that file must
not exist afterwards. Each backend (local, bubblewrap, docker on a live engine) and each
program (main.py, run_flow.py, run_mcp.py and its stdio server, the batch runner, locally and
on Ray) against the scripted model server.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from app.batch import read_results
from app.testing import KeyedScripts, ScriptedLLMServer, call, text, tool_calls
from tests.batch_helpers import write_tasks
from tests.proc_utils import ROOT, processes_mentioning, short_temp_dir
from tests.sandbox_utils import (
    BACKENDS,
    DOCKER_IMAGE,
    requires_bwrap,
    requires_docker,
    sandbox_section,
)
from tests.test_main_e2e import child_env, write_config
from tests.test_sandbox_docker_programs import tool_outputs

#: Files the model plants: what an unisolated Python would import from its directory.
PLANTED = (
    "app/__init__.py",
    "app/sandbox/__init__.py",
    "app/sandbox/docker_relay.py",
    "app/sandbox/reaper.py",
    "app/mcp/__init__.py",
    "app/mcp/server.py",
    "app/batch/__init__.py",
    "app/batch/__main__.py",
    "app/batch/ray_backend.py",
    "docker/__init__.py",
    "ray/__init__.py",
    "sitecustomize.py",
    "usercustomize.py",
)


def payload(marker: Path) -> str:
    """What the planted files hold: one line on the host per run, naming who ran it."""
    return (
        "import os\n"
        f"with open({str(marker)!r}, 'a') as f:\n"
        "    f.write(f'{__file__} ran in pid {os.getpid()} as uid {os.getuid()}, "
        'key: {"OPENAI_API_KEY" in os.environ}\\n\')\n'
    )


def plant(directory: Path, marker: Path) -> None:
    """The planted files, written by the test (the programs' tests have the model do it)."""
    for name in PLANTED:
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(payload(marker))
    (directory / "zz-openmanus.pth").write_text(payload(marker).replace("\n", "; ") + "\n")


def plant_command(marker: Path) -> str:
    """A bash command the model runs to plant the files in its workspace."""
    code = payload(marker)
    lines = [f"mkdir -p {' '.join(sorted({str(Path(n).parent) for n in PLANTED}))}"]
    for name in PLANTED:
        lines.append(f"cat > {name} <<'PLANTED'\n{code}PLANTED")
    lines.append("ls app app/sandbox sitecustomize.py")
    return "\n".join(lines)


def assert_nothing_ran(marker: Path) -> None:
    assert not marker.exists(), f"planted code ran on the host:\n{marker.read_text()}"


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    return tmp_path / "planted-code-ran.txt"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture
def start_dir(tmp_path: Path, marker: Path) -> Path:
    """The directory the programs are started from, planted too."""
    path = tmp_path / "start"
    path.mkdir()
    plant(path, marker)
    return path


def run_program(
    start_dir: Path, tmp_path: Path, *argv: str, timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    """One of our programs (a file in the checkout, run the documented way) from ``start_dir``,
    with the agent's API key in its environment as a user would have it."""
    env = child_env(tmp_path)
    env["OPENAI_API_KEY"] = "sk-planted-test-0123456789abcdef"
    return subprocess.run(
        [sys.executable, *argv],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        cwd=start_dir,
        timeout=timeout,
    )


# ---- the sandbox and its tools, each backend -------------------------------------------------

_DRIVER = """
import asyncio, json, sys
from app.config import SandboxSettings
from app.sandbox.factory import create_sandbox
from app.tool.bash import Bash
from app.tool.python_execute import PythonExecute

async def main(settings, workspace):
    box = create_sandbox(SandboxSettings(**settings), workspace)
    try:
        py = await PythonExecute(sandbox=box).execute(code="print('python ran')")
        sh = await Bash(sandbox=box).execute(command="echo bash ran; setsid sleep 1 &")
        once = await box.run_python("print('run_python ran')")
    finally:
        await box.cleanup()
    print(json.dumps([py["observation"], str(sh), once.stdout]))

asyncio.run(main(json.loads(sys.argv[1]), sys.argv[2]))
"""


@pytest.mark.e2e
@pytest.mark.parametrize("backend", BACKENDS)
def test_each_backend_runs_no_planted_code_on_the_host(
    backend: str, tmp_path: Path, workspace: Path, start_dir: Path, marker: Path
) -> None:
    plant(workspace, marker)
    settings: dict[str, object] = {"backend": backend, "memory_limit": "256m"}
    if backend == "docker":
        settings["image"] = DOCKER_IMAGE
    env = child_env(tmp_path)
    env["OPENAI_API_KEY"] = "sk-planted-test-0123456789abcdef"
    # The driver itself starts isolated (it is the test's, not under test), from the planted
    # directory: every helper the sandbox starts inherits that directory unless it sets one.
    done = subprocess.run(
        [sys.executable, "-I", "-c", _DRIVER, json.dumps(settings), str(workspace)],
        capture_output=True,
        text=True,
        env=env,
        cwd=start_dir,
        timeout=240,
    )
    assert_nothing_ran(marker)
    assert done.returncode == 0, done.stderr
    python_out, bash_out, once_out = json.loads(done.stdout.splitlines()[-1])
    assert "python ran" in python_out and "bash ran" in bash_out and "run_python ran" in once_out


# ---- the programs -------------------------------------------------------------------------------


def manus_script(marker: Path, workspace_inside: str) -> list:
    """Plant with bash and with the editor, then start fresh processes with both tools."""
    return [
        tool_calls(call("bash", {"command": plant_command(marker)})),
        tool_calls(
            call(
                "str_replace_editor",
                {
                    "command": "create",
                    "path": f"{workspace_inside}/app/sandbox/docker_relay.py",
                    "file_text": payload(marker),
                },
            )
        ),
        tool_calls(call("python_execute", {"code": "print('python ran')"})),
        tool_calls(call("bash", {"command": "echo bash ran"})),
        tool_calls(call("terminate", {"status": "success"}), content="planted and ran"),
    ]


@pytest.mark.e2e
@pytest.mark.parametrize("backend", BACKENDS)
def test_main_py_runs_no_planted_code_on_the_host(
    backend: str,
    tmp_path: Path,
    workspace: Path,
    start_dir: Path,
    marker: Path,
    llm_server: ScriptedLLMServer,
) -> None:
    inside = "/workspace" if backend == "docker" else str(workspace)
    llm_server.push(*manus_script(marker, inside))
    cfg = write_config(tmp_path, llm_server.base_url)
    cfg.write_text(cfg.read_text() + sandbox_section(backend))
    proc = run_program(
        start_dir, tmp_path, str(ROOT / "main.py"), "-c", str(cfg), "-w", str(workspace),
        "-p", "plant and run",
    )  # fmt: skip
    assert_nothing_ran(marker)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "planted and ran"
    outputs = tool_outputs(llm_server)
    assert any("python ran" in o for o in outputs) and any("bash ran" in o for o in outputs)
    assert (workspace / "app" / "__init__.py").is_file()  # the files were planted
    assert (workspace / "sitecustomize.py").is_file()


@pytest.mark.e2e
@requires_docker
def test_run_flow_py_runs_no_planted_code_on_the_host(
    tmp_path: Path, workspace: Path, start_dir: Path, marker: Path, llm_server: ScriptedLLMServer
) -> None:
    llm_server.push(
        tool_calls(
            call(
                "planning",
                {"command": "create", "plan_id": "p", "title": "Plant", "steps": ["[MANUS] Plant"]},
            )
        ),
        *manus_script(marker, "/workspace"),
        text("Planted and ran."),
    )
    cfg = write_config(tmp_path, llm_server.base_url)
    cfg.write_text(cfg.read_text() + sandbox_section("docker"))
    proc = run_program(
        start_dir, tmp_path, str(ROOT / "run_flow.py"), "-c", str(cfg), "-w", str(workspace),
        "-p", "plant",
    )  # fmt: skip
    assert_nothing_ran(marker)
    assert proc.returncode == 0, proc.stderr
    assert any("python ran" in o for o in tool_outputs(llm_server))
    assert (workspace / "app" / "__init__.py").is_file()


@pytest.mark.e2e
@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=requires_docker)])
def test_run_mcp_py_and_its_stdio_server_run_no_planted_code_on_the_host(
    backend: str,
    tmp_path: Path,
    workspace: Path,
    start_dir: Path,
    marker: Path,
    llm_server: ScriptedLLMServer,
) -> None:
    """Our MCP server, started over stdio by run_mcp.py, runs isolated and outside any
    workspace: on the local backend the model's shell reads its parent's (the server's)
    working directory and command line."""
    probe = "echo bash ran; readlink /proc/$PPID/cwd; tr '\\0' ' ' < /proc/$PPID/cmdline"
    llm_server.push(
        tool_calls(call("mcp_openmanus_bash", {"command": plant_command(marker)})),
        tool_calls(call("mcp_openmanus_python_execute", {"code": "print('python ran')"})),
        tool_calls(call("mcp_openmanus_bash", {"command": probe})),
        tool_calls(call("mcp_openmanus_terminate", {"status": "success"}), content="done"),
    )
    cfg = write_config(tmp_path, llm_server.base_url)
    cfg.write_text(cfg.read_text() + sandbox_section(backend))
    proc = run_program(
        start_dir, tmp_path, str(ROOT / "run_mcp.py"), "--config", str(cfg), "-w",
        str(workspace), "-p", "plant",
    )  # fmt: skip
    assert_nothing_ran(marker)
    assert proc.returncode == 0, proc.stderr
    outputs = tool_outputs(llm_server)
    assert any("python ran" in o for o in outputs), outputs
    assert (workspace / "app" / "__init__.py").is_file()
    if backend == "local":
        server = next(o for o in outputs if "bash ran" in o)
        lines = server.split("bash ran", 1)[1].split()
        assert lines[0] == "/", server  # the server's working directory
        assert "-I" in lines and "app.mcp.server" in lines, server


def batch_tasks(tmp_path: Path, marker: Path, inside: str) -> tuple[Path, KeyedScripts]:
    prompt = "Task planted: plant and run."
    tasks = write_tasks(tmp_path / "tasks.jsonl", [{"id": "planted", "prompt": prompt}])
    return tasks, KeyedScripts({prompt: manus_script(marker, inside)})


def batch_config(tmp_path: Path, base_url: str, section: str = "") -> Path:
    """main.py's config, with the batch's workspaces under ``tmp_path/runs``."""
    cfg = write_config(tmp_path, base_url)
    cfg.write_text(f'workspace_root = "{tmp_path / "runs"}"\n' + cfg.read_text() + section)
    return cfg


@pytest.mark.e2e
@requires_docker
def test_the_batch_runner_runs_no_planted_code_on_the_host(
    tmp_path: Path, start_dir: Path, marker: Path
) -> None:
    tasks, scripts = batch_tasks(tmp_path, marker, "/workspace")
    with ScriptedLLMServer(responder=scripts) as server:
        cfg = batch_config(tmp_path, server.base_url, sandbox_section("docker"))
        out = tmp_path / "out.jsonl"
        # ``python -m`` puts the current directory first on sys.path (Python's own rule, before
        # any of our code runs): the runner is started the way docs/batch.md says for that.
        proc = run_program(start_dir, tmp_path, "-I", "-m", "app.batch", str(tasks), "-o",
                           str(out), "-c", str(cfg))  # fmt: skip
    assert_nothing_ran(marker)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = read_results(out)["planted"]
    assert result.final_answer == "planted and ran", result


@pytest.mark.ray
def test_ray_workers_run_no_planted_code_on_the_host(
    tmp_path: Path, start_dir: Path, marker: Path
) -> None:
    """Ray puts the driver's working directory first on its workers' ``sys.path`` (and runs
    them there) unless the job has a ``working_dir``: the backend gives it an empty one."""
    pytest.importorskip("ray")
    tasks, scripts = batch_tasks(tmp_path, marker, str(tmp_path / "runs" / "planted"))
    temp = short_temp_dir("omray-")
    env_json = json.dumps({"env_vars": {"OPENMANUS_BLOCK_NETWORK": "1"}})
    try:
        with ScriptedLLMServer(responder=scripts) as server:
            cfg = batch_config(tmp_path, server.base_url)
            out = tmp_path / "out.jsonl"
            env = child_env(tmp_path)
            env.update(RAY_AUTH_MODE="disabled", OPENAI_API_KEY="sk-planted-0123456789abcdef")
            del env["OPENMANUS_BLOCK_NETWORK"]  # Ray's daemons reach the node's address
            proc = subprocess.run(
                [sys.executable, "-I", "-m", "app.batch", str(tasks), "-o", str(out), "-c",
                 str(cfg), "-b", "ray", "--ray-num-cpus", "1", "--ray-temp-dir", str(temp),
                 "--ray-runtime-env", env_json],
                stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env,
                cwd=start_dir, timeout=240,
            )  # fmt: skip
        assert_nothing_ran(marker)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert read_results(out)["planted"].final_answer == "planted and ran"
    finally:
        for pid in processes_mentioning(str(temp)):
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(temp, ignore_errors=True)


@pytest.mark.e2e
@requires_bwrap
def test_bubblewrap_runs_python_started_by_a_relative_interpreter_path(
    tmp_path: Path, workspace: Path, llm_server: ScriptedLLMServer
) -> None:
    """main.py started as ``../venv/bin/python main.py`` from a sibling directory (issue 34,
    "Also found"): ``sys.executable`` keeps the ``..``, which does not exist inside bwrap."""
    venv = Path(sys.prefix)
    (tmp_path / "co").mkdir()
    (tmp_path / "venv").symlink_to(venv)
    llm_server.push(
        tool_calls(call("python_execute", {"code": "import sys; print(6 * 7, sys.prefix)"})),
        tool_calls(call("terminate", {"status": "success"}), content="ran"),
    )
    cfg = write_config(tmp_path, llm_server.base_url)
    cfg.write_text(cfg.read_text() + sandbox_section("bubblewrap"))
    proc = subprocess.run(
        ["../venv/bin/python", str(ROOT / "main.py"), "-c", str(cfg), "-w", str(workspace),
         "-p", "run python"],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, env=child_env(tmp_path),
        cwd=tmp_path / "co", timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    output = tool_outputs(llm_server)[0]
    assert '"observation": "42 ' in output, output
    assert "No such file" not in output
