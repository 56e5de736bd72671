"""``[sandbox]`` in the config file and how agents pick their backend from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.agent.manus import Manus
from app.agent.swe import SWEAgent
from app.config import AppConfig, LLMSettings, SandboxSettings, config, load_config
from app.exceptions import ConfigError
from app.sandbox import BubblewrapSandbox, LocalSandbox
from app.sandbox.docker import DockerSandbox
from app.testing import call, tool_calls
from app.tool import Bash, PythonExecute, StrReplaceEditor
from app.utils.sizes import parse_size
from tests.sandbox_utils import requires_bwrap


def _write(tmp_path: Path, sandbox: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(f'[llm]\nmodel = "m"\napi_key = "k-123456"\n\n[sandbox]\n{sandbox}\n')
    return path


def test_backend_key_and_upstream_keys(tmp_path: Path) -> None:
    app = load_config(
        _write(
            tmp_path,
            'backend = " Bubblewrap "\nmemory_limit = "1g"\n'
            "cpu_limit = 0.5\ntimeout = 60\nnetwork_enabled = true",
        )
    )
    sandbox = app.sandbox
    assert (sandbox.backend, sandbox.effective_backend) == ("bubblewrap", "bubblewrap")
    assert (sandbox.memory_limit, sandbox.cpu_limit, sandbox.timeout) == ("1g", 0.5, 60)
    assert SandboxSettings().effective_backend == "local"
    assert SandboxSettings(use_sandbox=True).effective_backend == "docker"  # upstream meaning
    assert SandboxSettings(use_sandbox=True, backend="bubblewrap").effective_backend == (
        "bubblewrap"
    )


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('backend = "jail"', "backend"),
        ('memory_limit = "lots"', "not a size"),
        ("cpu_limit = 0", "cpu_limit"),
        ("max_processes = -1", "max_processes"),
    ],
)
def test_bad_sandbox_values_are_reported(tmp_path: Path, line: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(_write(tmp_path, line))


def test_sizes() -> None:
    assert parse_size("512m") == 512 * 1024**2
    assert parse_size("1.5g") == int(1.5 * 1024**3)
    assert parse_size("2GiB") == 2 * 1024**3
    assert parse_size(4096) == 4096
    for bad in ("", "12x", "-1m", "0"):
        with pytest.raises(ValueError):
            parse_size(bad)


@pytest.mark.parametrize(
    ("backend", "kind"),
    [
        ("local", LocalSandbox),
        pytest.param("bubblewrap", BubblewrapSandbox, marks=requires_bwrap),
        ("docker", DockerSandbox),
    ],
)
def test_agents_share_one_sandbox_of_the_configured_backend(
    make_llm, tmp_path: Path, backend: str, kind: type
) -> None:
    config.use(AppConfig(llm=LLMSettings(model="m"), sandbox=SandboxSettings(backend=backend)))
    try:
        manus = Manus(llm=make_llm(), workspace=tmp_path)
        swe = SWEAgent(llm=make_llm(), workspace=tmp_path)
    finally:
        config.reset()
    tools = [
        t for t in manus.available_tools if isinstance(t, PythonExecute | Bash | StrReplaceEditor)
    ]
    assert len(tools) == 3 and all(isinstance(t.sandbox, kind) for t in tools)
    assert len({id(t.sandbox) for t in tools}) == 1
    assert not tools[0].sandbox.started  # created lazily
    assert all(
        isinstance(t.sandbox, kind)
        for t in swe.available_tools
        if isinstance(t, Bash | StrReplaceEditor)
    )


@requires_bwrap
@pytest.mark.e2e
async def test_manus_runs_its_tools_in_the_configured_sandbox(
    llm_server, make_llm, tmp_path: Path
) -> None:
    llm_server.push(
        tool_calls(call("bash", {"command": "touch /usr/pwned-by-agent; echo rc=$?"})),
        tool_calls(call("terminate", {"status": "success"}), content="done"),
    )
    config.use(AppConfig(llm=LLMSettings(model="m"), sandbox=SandboxSettings(backend="bubblewrap")))
    try:
        agent = Manus(llm=make_llm(), workspace=tmp_path)
    finally:
        config.reset()
    result = await agent.run("try")
    assert result.ok
    tool_text = next(
        m["content"] for m in llm_server.requests[1].body["messages"] if m["role"] == "tool"
    )
    assert "Read-only file system" in tool_text and "rc=1" in tool_text
    assert not agent.available_tools.get_tool("bash").sandbox.started  # cleaned up after run
