"""The terminal programs share one set of options: each lists them with the same help and
checks them the same way, and every way of starting them still works."""

from __future__ import annotations

import ast
import importlib
import json
import os
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from subprocess import Popen
from typing import Any

import pytest

from app.testing import call, text, tool_calls
from tests.test_main_e2e import child_env, run_program, write_config
from tests.test_run_flow_e2e import plan_call

pytestmark = pytest.mark.e2e  # runs the programs in subprocesses

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = {"main.py": "app.cli.agent", "run_flow.py": "app.cli.flow", "run_mcp.py": "app.cli.mcp"}

#: Shared options with the help every program gives them (whitespace normalised).
SHARED = [
    "-p PROMPT, --prompt PROMPT run this one task and exit",
    "-c CONFIG, --config CONFIG config file (default: $OPENMANUS_CONFIG, else config/config.toml)",
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
        "--max-steps MAX_STEPS step budget per task (default: 20)",
        "--workspace WORKSPACE directory the agents work in",
    ],
    "run_flow.py": [
        "--max-steps MAX_STEPS step budget of each agent per plan step",
        "--workspace WORKSPACE directory the agents work in",
        "--timeout TIMEOUT seconds allowed for one task's whole flow (default: 3600)",
        "--data-analysis, --no-data-analysis add the data-analysis agent "
        "(default: [runflow] use_data_analysis_agent)",
    ],
    "run_mcp.py": [
        "--connection {http,sse,stdio,streamable-http} stdio (start our server; default), sse or "
        "http (connect to --server-url)",
        "--max-steps MAX_STEPS step budget per task (default: 20)",
        "--workspace WORKSPACE directory the started server's tools work in (stdio only)",
        "-i, --interactive one task per line until 'exit', 'quit', 'q' or end of input",
    ],
}


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )


def help_of(*command: str) -> str:
    env = {**os.environ, "COLUMNS": "100"}
    proc = subprocess.run(
        [sys.executable, *command, "--help"],
        stdin=subprocess.DEVNULL,
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
    # One meaning per letter: -c is --config in every program (run_mcp.py's --connection has
    # no short form).
    assert text.count(" -c ") == text.count("-c CONFIG, --config CONFIG") == 1, text


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
    proc = run_python(code)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_help_runs_the_program_file_and_loads_nothing_heavy(program: str) -> None:
    heavy = ("openai", "tiktoken", "pydantic", "matplotlib", "app.agent.manus", "app.flow")
    code = (
        "import runpy, sys\n"
        f"sys.argv = [{program!r}, '--help']\n"
        "try:\n"
        f"    runpy.run_path({str(ROOT / program)!r}, run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"
        f"heavy = [m for m in {heavy!r} if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    proc = run_python(code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"usage: {program} ")


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


# ---- what the programs print, and what they refuse (real processes, scripted model) -------------


def run_cli(
    program: str, tmp_path: Path, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return run_program(ROOT / program, tmp_path, *args, stdin=stdin, timeout=120)


def answering_42(program: str) -> list[Any]:
    """Replies with which ``program``'s task runs a tool, then answers "42"."""
    prefix = "mcp_openmanus_" if program == "run_mcp.py" else ""
    compute = tool_calls(call(f"{prefix}python_execute", {"code": "print(6 * 7)"}))
    done = call(f"{prefix}terminate", {"status": "success"})
    if program == "run_flow.py":  # a plan, its one step, then the summary
        return [plan_call("[MANUS] Compute"), compute, tool_calls(done, content="ok"), text("42")]
    return [compute, tool_calls(done, content="42")]


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_quiet_shows_only_the_answer(program: str, tmp_path: Path, llm_server) -> None:
    cfg = write_config(tmp_path, llm_server.base_url)
    task = ("-c", str(cfg), "-w", str(tmp_path / "ws"), "-p", "six times seven")
    llm_server.push(*answering_42(program))
    loud = run_cli(program, tmp_path, *task)
    assert loud.returncode == 0, loud.stderr
    assert "Tokens: " in loud.stderr and "Session " in loud.stderr  # what -q hides
    llm_server.push(*answering_42(program))
    quiet = run_cli(program, tmp_path, *task, "-q")
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stdout == "42\n"
    assert quiet.stderr == ""


def test_quiet_still_shows_the_error(tmp_path: Path, llm_server) -> None:
    llm_server.push(tool_calls(call("python_execute", {"code": "print(1)"})))
    cfg = write_config(tmp_path, llm_server.base_url)
    proc = run_cli("main.py", tmp_path, "-q", "-c", str(cfg), "--max-steps", "1", "-p", "loop")
    assert proc.returncode == 1 and proc.stdout == ""
    *warnings, last = proc.stderr.splitlines()
    assert (
        last == "error: stopped at max_steps=1 without finishing the task (stop reason: max_steps)"
    )
    assert all(" WARNING " in line for line in warnings), proc.stderr


def built_if_anything(program: str, tmp_path: Path, base_url: str) -> tuple[list[str], Path]:
    """Options with which ``program``, once it builds its agents, leaves a trace: main.py and
    run_flow.py start mcp.json's one server, which touches a marker file; run_mcp.py connects
    to ``--server-url`` (the scripted server, which records the attempt). Returns the options
    and the marker."""
    marker = tmp_path / "built"
    cfg = write_config(tmp_path, base_url)
    script = f"import pathlib; pathlib.Path({str(marker)!r}).touch()"
    servers = {"marker": {"command": sys.executable, "args": ["-c", script]}}
    (tmp_path / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
    args = ["-c", str(cfg), "-w", str(tmp_path / "ws")]
    if program == "run_mcp.py":
        args += ["--connection", "http", "--server-url", f"{base_url}/mcp"]
    return args, marker


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_the_trace_shows_a_built_agent(program: str, tmp_path: Path, llm_server) -> None:
    """The control for the tests below: a task does build (and leaves the trace)."""
    args, marker = built_if_anything(program, tmp_path, llm_server.base_url)
    run_cli(program, tmp_path, *args, stdin="hi\n")
    if program == "run_mcp.py":
        assert [r.path for r in llm_server.requests][:1] == ["/v1/mcp"]
    else:
        assert marker.exists()


def nothing_was_built(tmp_path: Path, marker: Path, llm_server) -> bool:
    return not marker.exists() and not (tmp_path / "ws").exists() and not llm_server.requests


NO_TASK = 'error: no task given: the input ended without one (or give it with -p "task")'
EMPTY_INPUTS = [
    ("main.py", (), "", NO_TASK),
    ("main.py", (), "\n   \n\t\n", NO_TASK),
    ("run_flow.py", (), "", NO_TASK),
    ("run_flow.py", (), " \n\n", NO_TASK),
    ("run_mcp.py", (), "", NO_TASK),
    ("run_mcp.py", (), "\n", "error: the task is empty"),
    ("run_mcp.py", (), "   \nsecond line\n", "error: the task is empty"),
    ("run_mcp.py", ("-i",), "\n \n", NO_TASK),
]


@pytest.mark.parametrize(("program", "args", "stdin", "message"), EMPTY_INPUTS)
def test_no_task_on_stdin_is_an_error_that_starts_nothing(
    program: str, args: tuple[str, ...], stdin: str, message: str, tmp_path: Path, llm_server
) -> None:
    options, marker = built_if_anything(program, tmp_path, llm_server.base_url)
    proc = run_cli(program, tmp_path, *options, *args, stdin=stdin)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == message + "\n" and proc.stdout == ""
    assert nothing_was_built(tmp_path, marker, llm_server)  # and so no `empty` session


@pytest.mark.parametrize(
    ("program", "args"), [("main.py", ()), ("run_flow.py", ()), ("run_mcp.py", ("-i",))]
)
def test_leaving_before_a_task_starts_nothing_and_exits_0(
    program: str, args: tuple[str, ...], tmp_path: Path, llm_server
) -> None:
    options, marker = built_if_anything(program, tmp_path, llm_server.base_url)
    proc = run_cli(program, tmp_path, *options, *args, stdin="\nQuit\n")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == proc.stderr == ""
    assert nothing_was_built(tmp_path, marker, llm_server)


@contextmanager
def on_a_terminal(program: str, tmp_path: Path, *args: str) -> Iterator[tuple[Popen, int]]:
    """``program`` with a pty as its stdin (a person at a terminal); yields it and the pty's
    master end, where the test types."""
    master, slave = os.openpty()
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / program), *args],
        stdin=slave,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(tmp_path),
        cwd=tmp_path,
    )
    os.close(slave)
    try:
        yield proc, master
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)
        os.close(master)


@pytest.mark.parametrize(
    ("program", "args", "typed", "code"),
    [
        ("main.py", (), b"\n  \n\x04", 0),  # blank lines, then Ctrl-D
        ("run_flow.py", (), b"exit\n", 0),
        ("run_mcp.py", ("-i",), b"\n\x04", 0),
        ("run_mcp.py", (), b"  \n", 2),  # the one task asked for is empty
    ],
    ids=["main-ctrl-d", "run_flow-exit", "run_mcp-i-ctrl-d", "run_mcp-empty"],
)
def test_a_terminal_session_without_a_task_leaves_no_session(
    program: str, args: tuple[str, ...], typed: bytes, code: int, tmp_path: Path, llm_server
) -> None:
    options, marker = built_if_anything(program, tmp_path, llm_server.base_url)
    with on_a_terminal(program, tmp_path, *options, *args) as (proc, master):
        os.write(master, typed)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert out == "" and "Traceback" not in err
    if code == 0:
        assert "type a task and press Enter" in err and err.endswith("Goodbye.\n"), err
    else:
        assert err.endswith("error: the task is empty\n"), err
    assert nothing_was_built(tmp_path, marker, llm_server)


def test_a_terminal_session_runs_the_typed_task(tmp_path: Path, llm_server) -> None:
    """The control for the test above: at a terminal, a typed task is built for and run."""
    llm_server.push(tool_calls(call("terminate", {"status": "success"}), content="hello"))
    cfg = write_config(tmp_path, llm_server.base_url)
    workspace = tmp_path / "ws"
    with on_a_terminal("main.py", tmp_path, "-c", str(cfg), "-w", str(workspace)) as (
        proc,
        master,
    ):
        os.write(master, b"say hello\n\x04")
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out == "hello\n"
    assert err.count("Enter your prompt: ") == 2 and err.endswith("Goodbye.\n"), err
    assert len(list(workspace.glob(".sessions/*.jsonl"))) == 1


# ---- -c is --config in every program ------------------------------------------------------------


def test_run_mcp_c_is_the_config_file(tmp_path: Path, llm_server) -> None:
    llm_server.push(
        tool_calls(call("mcp_openmanus_terminate", {"status": "success"}), content="ok")
    )
    cfg = write_config(tmp_path, llm_server.base_url)
    proc = run_cli("run_mcp.py", tmp_path, "-c", str(cfg), "-w", str(tmp_path / "ws"), "-p", "hi")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "ok\n"


@pytest.mark.parametrize("connection", ["stdio", "sse", "http", "streamable-http"])
def test_run_mcp_c_with_a_connection_type_points_to_connection(
    connection: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from app.cli import mcp

    assert mcp.main(["-c", connection, "-p", "x"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "error: -c is --config (a config file) in run_mcp.py, as in main.py and run_flow.py; "
        f"for the connection type use --connection {connection}\n"
    )


def test_run_mcp_c_takes_a_file_named_like_a_connection(tmp_path: Path, llm_server) -> None:
    """A config file that happens to be called ``sse`` is a config file."""
    llm_server.push(
        tool_calls(call("mcp_openmanus_terminate", {"status": "success"}), content="ok")
    )
    write_config(tmp_path, llm_server.base_url).rename(tmp_path / "sse")
    proc = run_cli("run_mcp.py", tmp_path, "-c", "sse", "-w", str(tmp_path / "ws"), "-p", "hi")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "ok\n"
