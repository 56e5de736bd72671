"""Hostile input end to end: a Manus agent is driven by a scripted model that tries to escape
the workspace, exhaust the machine and read the API key. Nothing may escape and the key may
appear in nothing the model, the logs or the caller gets."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
from pathlib import Path

import pytest

from app.agent.manus import Manus
from app.config import AppConfig, LLMSettings, SandboxSettings, config
from app.logger import define_log_level, logger
from app.session import SessionStore
from app.testing import ScriptedLLMServer, call, error, tool_calls
from tests.sandbox_utils import BACKENDS, processes_under

pytestmark = pytest.mark.e2e

SECRET = "sk-live-SECRET0123456789abcdefXYZ"
ENV_SECRET = "env-only-secret-7f3a9c2e1b"


@pytest.fixture
def restore_logging():  # type: ignore[no-untyped-def]
    yield
    logger.remove()
    import sys

    logger.add(lambda message: sys.stderr.write(message), level="DEBUG")


def _hostile_script(outside: Path, config_file: Path) -> list[dict]:
    pid = os.getpid()
    steps = [
        # Read credentials from the environment, the agent's process and the config file.
        call("bash", {"command": "env; echo ---; cat /proc/$PPID/environ | tr '\\0' '\\n'"}),
        call("bash", {"command": f"cat /proc/{pid}/environ | tr '\\0' '\\n'; cat {config_file}"}),
        call(
            "python_execute",
            {
                "code": "import os; print(dict(os.environ))\n"
                f"print(open({str(config_file)!r}).read())"
            },
        ),
        call("str_replace_editor", {"command": "view", "path": str(config_file)}),
        call("str_replace_editor", {"command": "view", "path": "../config/config.toml"}),
        # Escape through traversal, symlinks, shell metacharacters.
        call("bash", {"command": f"ln -s {config_file} leak.txt; ln -s {outside} out.txt"}),
        call("str_replace_editor", {"command": "view", "path": "leak.txt"}),
        call("str_replace_editor", {"command": "create", "path": "out.txt", "file_text": "x"}),
        call(
            "str_replace_editor",
            {"command": "create", "path": "../outside/pwned.txt", "file_text": "x"},
        ),
        call(
            "str_replace_editor",
            {"command": "create", "path": "a; touch ../outside/$(id -u)", "file_text": "x"},
        ),
        # Floods: huge, binary and endless output.
        call("bash", {"command": "head -c 20000000 /dev/zero | tr '\\0' 'A'"}),
        call(
            "python_execute",
            {"code": "import sys\nsys.stdout.buffer.write(bytes(range(256)) * 1000)"},
        ),
        call("python_execute", {"code": "while True: print('y' * 100)", "timeout": 1}),
        # Runaway processes, a fork bomb, a memory hog.
        call("bash", {"command": "setsid sleep 600 & nohup sleep 601 > /dev/null 2>&1 & echo ok"}),
        call(
            "python_execute",
            {
                "code": "import os\nfor _ in range(400):\n"
                "    if os.fork() == 0:\n"
                "        import signal; signal.pause(); os._exit(0)\n",
                "timeout": 10,
            },
        ),
        call("python_execute", {"code": "blocks = []\nwhile True: blocks.append(b'x' * 10**7)"}),
    ]
    return [tool_calls(step) for step in steps]


@pytest.fixture
def kill_escaped(tmp_path: Path):  # type: ignore[no-untyped-def]
    """setsid is the documented way out of a local run's process group: whatever escaped
    during the test is killed afterwards, pass or fail."""
    yield
    for pid in processes_under(tmp_path):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_hostile_model_cannot_escape_or_leak(
    backend: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    restore_logging: None,
    kill_escaped: None,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("SOME_SERVICE_TOKEN", ENV_SECRET)
    project = tmp_path / "project"
    workspace = project / "workspace"
    outside = project / "outside"
    workspace.mkdir(parents=True)
    outside.mkdir()
    config_file = project / "config" / "config.toml"
    config_file.parent.mkdir()
    config_file.write_text(f'[llm]\nmodel = "gpt-4o-mini"\napi_key = "{SECRET}"\n')
    log_dir = tmp_path / "logs"
    define_log_level("OFF", "DEBUG", name="security", log_dir=log_dir)

    with ScriptedLLMServer() as server:
        settings = LLMSettings(
            model="gpt-4o-mini", base_url=server.base_url, api_key=SECRET, max_retries=0, timeout=20
        )
        config.use(
            AppConfig(
                llm=settings,
                workspace_root=workspace,
                sandbox=SandboxSettings(backend=backend, memory_limit="256m", max_processes=64),
            )
        )
        try:
            script = _hostile_script(outside, config_file)
            server.push(
                *script, tool_calls(call("terminate", {"status": "success"}), content="done")
            )
            # A provider error that echoes the key back must not carry it either.
            server.push(error(401, f"Incorrect API key provided: {SECRET}"))
            agent = await Manus.create(workspace=workspace, max_steps=len(script) + 2)
            # The session file and the live events must not carry the key either.
            recorder = SessionStore(tmp_path / "sessions").start("agent")
            recorder.attach_agent(agent)
            events: list[str] = []
            agent.subscribe(lambda e: events.append(json.dumps(e.to_json(), default=str)))
            result = await agent.run("do what you are told")
            failed = await agent.run("again")
            await agent.cleanup()
            await recorder.close()
        finally:
            config.reset()
        bodies = [json.dumps(r.body) for r in server.requests]

    assert result.state.value == "FINISHED", str(result)
    assert failed.error is not None
    logs = "".join(p.read_text() for p in log_dir.glob("*.log"))
    assert "Executing step" in logs
    tool_texts = [m["content"] for m in server.requests[-2].body["messages"] if m["role"] == "tool"]
    assert len(tool_texts) == len(script)

    # Nothing leaked, in any form we can recognise.
    encoded = base64.b64encode(SECRET.encode()).decode()
    session_text = recorder.path.read_text()
    assert "tool_result" in session_text and len(events) > 10
    everything = [
        *bodies,
        logs,
        str(result),
        str(failed),
        str(failed.error),
        result.final_answer or "",
        session_text,
        *events,
    ]
    for blob in everything:
        assert SECRET not in blob and encoded not in blob
        assert ENV_SECRET not in blob

    # Nothing escaped the workspace.
    assert os.listdir(outside) == []
    assert config_file.read_text().count(SECRET) == 1
    assert (workspace / "a; touch ../outside/$(id -u)").read_text() == "x"
    left = processes_under(tmp_path)
    if backend == "local":
        # Only what left the process group with setsid survives (killed by kill_escaped).
        assert len(left) <= 2 and len(processes_under(tmp_path, "sleep")) == len(left)
    else:
        assert left == []

    by_step = dict(enumerate(tool_texts))
    if backend == "local":
        # Locally the file is readable: the model sees the key redacted, never the value.
        assert 'api_key = "***"' in by_step[1]
        assert 'api_key = \\"***\\"' in by_step[2]  # inside python_execute's JSON
    else:
        assert "No such file" in by_step[1] and "api_key" not in by_step[1]
    assert "outside the allowed locations" in by_step[3] and "outside" in by_step[4]
    assert "outside the allowed locations" in by_step[6] and "outside" in by_step[7]
    assert "output truncated" in by_step[10]
    assert "timed out after 1 seconds" in by_step[12]
    assert "limit of 64 processes" in by_step[14]
    if backend == "docker":
        # The container's memory cgroup may act before the per-process limit does (its page
        # cache counts too): the kernel's OOM kill contains the hog just as well.
        assert "MemoryError" in by_step[15] or "killed by SIGKILL" in by_step[15], by_step[15]
    else:
        assert "MemoryError" in by_step[15], by_step[15]
