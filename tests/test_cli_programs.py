"""The terminal programs share one set of options: each lists them with the same help and
checks them the same way, and every way of starting them still works."""

from __future__ import annotations

import ast
import importlib
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e  # runs the programs' --help in subprocesses

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = {"main.py": "app.cli.agent", "run_flow.py": "app.cli.flow", "run_mcp.py": "app.cli.mcp"}

#: Shared options with the help every program gives them (whitespace normalised).
SHARED = [
    "-p PROMPT, --prompt PROMPT run this one task and exit",
    "--config CONFIG config file (default: $OPENMANUS_CONFIG, else config/config.toml)",
    "--max-steps MAX_STEPS",
    "-w WORKSPACE, --workspace WORKSPACE",
    "-v, --verbose show debug output",
    "-q, --quiet show only warnings, errors and the answer",
    "--version show program's version number and exit",
    "sessions, recording and replay:",
    "--resume ID restore session ID (memory, steps, plan, usage) and carry on",
    "--list-sessions list recent sessions of the workspace and exit",
    "--no-session do not write a session file (<workspace>/.sessions/<id>.jsonl)",
    "--record FILE save every LLM request and response of this run to FILE",
    "--replay FILE answer from FILE (made with --record) instead of the model; tools really run",
    "--strict-replay with --replay: stop at the first request that departs from the recording "
    "(default: warn and go on)",
]
#: What differs between the programs, exactly as it always read.
OWN = {
    "main.py": [
        "-c CONFIG, --config CONFIG",
        "--max-steps MAX_STEPS step budget per task (default: 20)",
        "--workspace WORKSPACE directory the agents work in",
    ],
    "run_flow.py": [
        "-c CONFIG, --config CONFIG",
        "--max-steps MAX_STEPS step budget of each agent per plan step",
        "--workspace WORKSPACE directory the agents work in",
        "--timeout TIMEOUT seconds allowed for one task's whole flow (default: 3600)",
        "--data-analysis, --no-data-analysis add the data-analysis agent "
        "(default: [runflow] use_data_analysis_agent)",
    ],
    "run_mcp.py": [
        "-c {http,sse,stdio,streamable-http}, --connection {http,sse,stdio,streamable-http}",
        "--max-steps MAX_STEPS step budget per task (default: 20)",
        "--workspace WORKSPACE directory the started server's tools work in (stdio only)",
        "-i, --interactive one task per line until 'exit', 'quit', 'q' or end of input",
    ],
}


def help_of(*command: str) -> str:
    env = {**os.environ, "COLUMNS": "100"}
    proc = subprocess.run(
        [sys.executable, *command, "--help"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return " ".join(proc.stdout.split())


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_each_program_lists_the_shared_options(program: str) -> None:
    text = help_of(str(ROOT / program))
    assert text.startswith(f"usage: {program} ")
    for line in SHARED + OWN[program]:
        assert line in text, f"{program} --help lacks: {line}"
    if program == "run_mcp.py":  # -c is --connection there, as in upstream's run_mcp.py
        assert "-c CONFIG" not in text


def test_python_m_app_cli_is_main_py() -> None:
    assert help_of("-m", "app.cli") == help_of(str(ROOT / "main.py"))


def test_console_scripts_start_their_programs(capsys: pytest.CaptureFixture[str]) -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["openmanus"] == "app.cli:main"
    for name, target in scripts.items():
        module, _, attribute = target.partition(":")
        main = getattr(importlib.import_module(module), attribute)
        with pytest.raises(SystemExit) as exit_info:
            main(["--help"])
        assert exit_info.value.code == 0, name
        assert capsys.readouterr().out.startswith("usage: "), name


@pytest.mark.parametrize("program", sorted(PROGRAMS))
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-steps", "0"], "--max-steps must be at least 1"),
        (["--record", "a.json", "--replay", "b.json"], "--record and --replay cannot be used"),
        (["--strict-replay"], "--strict-replay needs --replay FILE"),
        (["--resume", "x", "--no-session"], "--resume continues a session file; it cannot"),
    ],
)
def test_shared_checks_refuse_bad_values_in_each_program(
    program: str, args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    main = importlib.import_module(PROGRAMS[program]).main
    assert main(["-p", "task", *args]) == 2
    assert f"error: {message}" in capsys.readouterr().err


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_verbose_and_quiet_exclude_each_other(program: str, capsys) -> None:
    main = importlib.import_module(PROGRAMS[program]).main
    with pytest.raises(SystemExit) as exit_info:
        main(["-v", "-q"])
    assert exit_info.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_program_specific_checks_still_apply(capsys) -> None:
    from app.cli import flow, mcp

    assert flow.main(["-p", "x", "--timeout", "0"]) == 2
    assert "--timeout must be a positive number of seconds" in capsys.readouterr().err
    assert mcp.main(["-p", "x", "--server-url", "http://127.0.0.1:1/mcp"]) == 2
    assert "--server-url needs --connection sse or http" in capsys.readouterr().err


def test_importing_the_programs_loads_no_framework() -> None:
    """``--help`` and option errors cost argparse only: the framework (agents, config,
    pydantic) loads with :mod:`app.cli.session`, once a program's options are parsed."""
    code = (
        "import sys, app.cli, app.cli.flow, app.cli.mcp\n"
        "heavy = ('app.cli.session', 'app.agent', 'app.config', 'app.llm', 'pydantic')\n"
        "loaded = sorted(m for m in heavy if m in sys.modules)\n"
        "assert not loaded, loaded\n"
        "assert app.cli.EXIT_CONFIG == 2 and callable(app.cli.main)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr


def test_cli_modules_import_no_private_names() -> None:
    """Each program uses the others' public names only (``AgentSession``, ``version_text``)."""
    files = sorted((ROOT / "app" / "cli").glob("*.py")) + [ROOT / p for p in PROGRAMS]
    offenders = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("app"):
                offenders += [
                    f"{path.name}: {node.module}.{alias.name}"
                    for alias in node.names
                    if alias.name.startswith("_") and not alias.name.startswith("__")
                ]
    assert offenders == []
