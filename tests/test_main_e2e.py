"""main.py as a real terminal program: a subprocess against the scripted LLM server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.testing import ScriptedLLMServer, call, error, raw, text, tool_calls
from app.testing.netguard import SITE_DIR
from tests.conftest import TEST_API_KEY

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent
MAIN = ROOT / "main.py"


def write_config(tmp_path: Path, base_url: str, **extra: object) -> Path:
    lines = [
        "[llm]",
        'model = "gpt-4o-mini"',
        f'base_url = "{base_url}"',
        f'api_key = "{TEST_API_KEY}"',
        "max_retries = 0",
        "timeout = 30",
    ]
    lines += [f"{key} = {value}" for key, value in extra.items()]
    path = tmp_path / "config.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def child_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "OPENMANUS"))}
    env.update(
        PYTHONPATH=os.pathsep.join([str(SITE_DIR), str(ROOT)]),
        OPENMANUS_BLOCK_NETWORK="1",
        PYTHONUNBUFFERED="1",
        HOME=str(tmp_path),  # nothing may be written to the real home directory
        OPENMANUS_LOG_DIR=str(tmp_path / "logs"),  # nor log files into the project
    )
    return env


def run_program(
    program: Path, tmp_path: Path, *args: str, stdin: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """``program`` (main.py, run_flow.py, run_mcp.py) to its end in ``tmp_path``; its stdin
    is ``stdin``, else /dev/null (never the suite's own)."""
    return subprocess.run(
        [sys.executable, str(program), *args],
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=child_env(tmp_path),
        cwd=tmp_path,
        timeout=timeout,
    )


def run_main(
    tmp_path: Path, *args: str, stdin: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return run_program(MAIN, tmp_path, *args, stdin=stdin, timeout=timeout)


#: Starts a program with SIGINT at its default disposition, as a terminal does. A suite
#: started in the background (``nohup bash scripts/test.sh &``, or from a script) runs with
#: SIGINT ignored, and an ignored signal stays ignored across fork and exec: a test that
#: presses Ctrl-C must not let that decide what it tests.
_SIGINT_DEFAULT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
)


def as_from_a_terminal(*argv: str) -> list[str]:
    """The command line that runs the Python program ``argv`` as a terminal would start it
    (same process: the pid is the program's)."""
    return [sys.executable, "-c", _SIGINT_DEFAULT, *argv]


def start_main(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    """main.py with pipes on all three streams, for tests that talk to it while it runs (and
    press Ctrl-C: see :func:`as_from_a_terminal`)."""
    return subprocess.Popen(
        as_from_a_terminal(str(MAIN), *args),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(tmp_path),
        cwd=tmp_path,
    )


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


def test_one_shot_task_creates_and_runs_a_file(tmp_path, workspace, llm_server):
    llm_server.push(
        tool_calls(
            call(
                "str_replace_editor",
                {"command": "create", "path": "hello.py", "file_text": "print('hi from file')\n"},
            )
        ),
        tool_calls(call("python_execute", {"code": "import runpy; runpy.run_path('hello.py')"})),
        tool_calls(
            call("terminate", {"status": "success"}),
            content="Created hello.py; running it prints: hi from file",
        ),
    )
    cfg = write_config(tmp_path, llm_server.base_url)
    proc = run_main(
        tmp_path,
        "-p",
        "make a hello script and run it",
        "--config",
        str(cfg),
        "--workspace",
        str(workspace),
    )
    assert proc.returncode == 0, proc.stderr
    assert (workspace / "hello.py").read_text() == "print('hi from file')\n"
    assert proc.stdout.strip() == "Created hello.py; running it prints: hi from file"
    # Progress went to stderr: steps, tool calls, usage.
    assert "Executing step 1/20" in proc.stderr
    assert "python_execute" in proc.stderr and "Tokens:" in proc.stderr
    # The model read the program's output.
    third = llm_server.requests[2].body["messages"]
    outputs = [m["content"] for m in third if m["role"] == "tool"]
    assert "hi from file" in outputs[-1]
    # The workspace path reached the system prompt.
    assert str(workspace) in llm_server.requests[0].body["messages"][0]["content"]


def test_interactive_two_tasks_then_exit(tmp_path, workspace, llm_server):
    llm_server.push(text("answer one"), text("answer two"))
    cfg = write_config(tmp_path, llm_server.base_url)
    proc = run_main(
        tmp_path,
        "--config",
        str(cfg),
        "--workspace",
        str(workspace),
        stdin="first task\n\n   \nsecond task\nEXIT\nnever run\n",
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["answer one", "answer two"]
    assert len(llm_server.requests) == 2
    # One conversation across prompts: the second request carries the first exchange.
    contents = [m.get("content") for m in llm_server.requests[1].body["messages"]]
    assert contents[1:4] == ["first task", "answer one", "second task"]


def test_interactive_ends_at_eof(tmp_path, workspace, llm_server):
    llm_server.push(text("only answer"))
    cfg = write_config(tmp_path, llm_server.base_url)
    proc = run_main(tmp_path, "-c", str(cfg), "-w", str(workspace), stdin="just one")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "only answer"


def test_missing_config_is_one_clear_message(tmp_path):
    proc = run_main(tmp_path, "-p", "hi", "--config", str(tmp_path / "nope.toml"))
    assert proc.returncode == 2
    assert "nope.toml" in proc.stderr and "config.example.toml" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_broken_config_names_the_line(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text('[llm]\nmodel = "x"\nmax_tokens = = 3\n')
    proc = run_main(tmp_path, "-p", "hi", "--config", str(cfg))
    assert proc.returncode == 2
    assert "line 3" in proc.stderr and "Traceback" not in proc.stderr


def test_bad_key_is_one_clear_message(tmp_path, workspace, llm_server):
    llm_server.push(error(401, "Incorrect API key provided"))
    cfg = write_config(tmp_path, llm_server.base_url)
    proc = run_main(tmp_path, "-p", "hi", "-c", str(cfg), "-w", str(workspace))
    assert proc.returncode == 1
    assert "error:" in proc.stderr and "api_key" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert TEST_API_KEY not in proc.stderr + proc.stdout


def test_unreachable_endpoint_is_one_clear_message(tmp_path, workspace):
    with ScriptedLLMServer() as server:  # start and stop: its port is now closed
        dead_url = server.base_url
    cfg = write_config(tmp_path, dead_url)
    proc = run_main(tmp_path, "-p", "hi", "-c", str(cfg), "-w", str(workspace))
    assert proc.returncode == 1
    assert f"Nothing listens at {dead_url} (connection refused)" in proc.stderr
    assert "Traceback" not in proc.stderr


def default_retry_config(tmp_path: Path, base_url: str) -> Path:
    """A config as a new user writes it: the default retries (5, backoff from 1 s), so a
    retried error would take half a minute."""
    path = tmp_path / "config.toml"
    path.write_text(
        f'[llm]\nmodel = "gpt-4o-mini"\nbase_url = "{base_url}"\napi_key = "{TEST_API_KEY}"\n'
    )
    return path


def run_timed(
    tmp_path: Path, workspace: Path, cfg: Path
) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    proc = run_main(tmp_path, "-p", "hi", "-c", str(cfg), "-w", str(workspace), "--no-session")
    return proc, time.monotonic() - started


def error_line(stderr: str) -> str:
    (line,) = [line for line in stderr.splitlines() if line.startswith("error:")]
    return line


def test_a_closed_port_fails_at_once_with_default_retries(tmp_path, workspace):
    """Nothing listening is not transient: no retries, one message naming the endpoint."""
    with ScriptedLLMServer() as server:
        dead_url = server.base_url
    proc, took = run_timed(tmp_path, workspace, default_retry_config(tmp_path, dead_url))
    assert proc.returncode == 1
    line = error_line(proc.stderr)
    assert f"Nothing listens at {dead_url} (connection refused)" in line
    assert "is the server running, and is base_url right?" in line
    assert "retry" not in proc.stderr  # the first retry alone would wait 1-2 s
    assert took < 10, took  # the retried path took 33-36 s


def test_a_refused_key_fails_at_once_with_default_retries(tmp_path, workspace, llm_server):
    llm_server.push(error(401, "Incorrect API key provided"), text("never asked"))
    proc, _ = run_timed(tmp_path, workspace, default_retry_config(tmp_path, llm_server.base_url))
    assert proc.returncode == 1
    line = error_line(proc.stderr)
    assert "refused the credentials" in line and "api_key" in line
    assert len(llm_server.requests) == 1
    assert "retry" not in proc.stderr


PAGE = (
    "<!DOCTYPE html><html><head><title>Welcome to nginx!</title>"
    "<style>body { width: 35em; }</style></head><body>"
    + "<p>deep-in-the-page</p>" * 500
    + "</body></html>"
)


@pytest.mark.parametrize("status", [404, 200])
def test_a_web_page_instead_of_an_api_is_a_short_message(tmp_path, workspace, llm_server, status):
    """base_url pointing at a web server: the page's title, not the page, and no retries."""
    llm_server.push(raw(status, PAGE, content_type="text/html"), text("never asked"))
    proc, _ = run_timed(tmp_path, workspace, default_retry_config(tmp_path, llm_server.base_url))
    assert proc.returncode == 1
    line = error_line(proc.stderr)
    assert "an HTML page titled 'Welcome to nginx!'" in line
    assert llm_server.base_url in line and "base_url" in line
    if status == 404:
        assert "HTTP 404" in line
    assert "deep-in-the-page" not in proc.stderr and "<style>" not in proc.stderr
    assert len(line) < 500, line
    assert len(llm_server.requests) == 1


def test_a_misspelt_config_key_is_an_error_naming_it(tmp_path, workspace, llm_server):
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'[llm]\nmodle = "gpt-4o-mini"\nbase_ulr = "{llm_server.base_url}"\n')
    proc = run_main(tmp_path, "-p", "hi", "-c", str(cfg), "-w", str(workspace))
    assert proc.returncode == 2
    assert "[llm] modle: unknown key (did you mean 'model'?)" in proc.stderr
    assert "[llm] base_ulr: unknown key (did you mean 'base_url'?)" in proc.stderr
    assert "strict = false" in proc.stderr and "Traceback" not in proc.stderr
    assert llm_server.requests == []


def test_max_steps_exhaustion_exits_1(tmp_path, workspace, llm_server):
    llm_server.push(
        *[tool_calls(call("python_execute", {"code": f"print({i})"})) for i in range(2)]
    )
    cfg = write_config(tmp_path, llm_server.base_url)
    proc = run_main(
        tmp_path, "-p", "loop", "-c", str(cfg), "-w", str(workspace), "--max-steps", "2", "--quiet"
    )
    assert proc.returncode == 1
    assert "without finishing" in proc.stderr
    assert "Executing step" not in proc.stderr  # --quiet hides progress


def test_ctrl_c_stops_the_task_and_returns_to_the_prompt(tmp_path, workspace, llm_server):
    fifo = tmp_path / "started.fifo"
    os.mkfifo(fifo)
    code = (
        "import os, time\n"
        f"with open({str(fifo)!r}, 'w') as f:\n"
        "    f.write(str(os.getpid()))\n"
        "import threading; threading.Event().wait()\n"
    )
    llm_server.push(
        tool_calls(call("python_execute", {"code": code, "timeout": 120})),
        text("second answer"),
    )
    cfg = write_config(tmp_path, llm_server.base_url)
    proc = start_main(tmp_path, "-c", str(cfg), "-w", str(workspace))
    try:
        proc.stdin.write("slow task\n")
        proc.stdin.flush()
        with open(fifo) as f:  # returns once the tool's child process is running
            child_pid = int(f.read())
        os.kill(child_pid, 0)  # alive
        proc.send_signal(signal.SIGINT)
        seen = []
        for line in proc.stderr:
            seen.append(line)
            if "Task interrupted." in line:
                break
        else:
            pytest.fail("no interruption message:\n" + "".join(seen))
        proc.stdin.write("second task\nexit\n")
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
        assert proc.stdout.read().strip() == "second answer"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # The tool's process was killed with the task, not left behind.
    with pytest.raises(ProcessLookupError):
        os.kill(child_pid, 0)
    # The second task's request shows the interrupted call was closed off for the model.
    second = llm_server.requests[1].body["messages"]
    assert any(m["role"] == "tool" for m in second)


def test_ctrl_c_at_the_prompt_exits_130(tmp_path, workspace, llm_server):
    llm_server.push(text("first answer"))
    cfg = write_config(tmp_path, llm_server.base_url)
    proc = start_main(tmp_path, "-c", str(cfg), "-w", str(workspace))
    try:
        proc.stdin.write("\n  \nfirst task\n")  # blank lines are skipped
        proc.stdin.flush()
        assert proc.stdout.readline() == "first answer\n"  # the prompt now waits for a task
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)
    [session] = workspace.glob(".sessions/*.jsonl")  # the task's, and no other
    assert "first task" in session.read_text()


def test_sigint_reaches_a_program_started_with_it_ignored(tmp_path):
    """The control for :func:`as_from_a_terminal`: what it starts handles SIGINT by default,
    even when the test process ignores SIGINT (as a suite started in the background does)."""
    code = "import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        plain, wrapped = (
            subprocess.run(
                argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60
            ).stdout
            for argv in ([sys.executable, "-c", code], as_from_a_terminal("-c", code))
        )
    finally:
        signal.signal(signal.SIGINT, previous)
    assert (plain, wrapped) == ("False\n", "True\n")


# ---- stdout carries the answer only -----------------------------------------------------------


def test_stdout_is_exactly_the_answer_of_a_run_that_used_tools(tmp_path, workspace, llm_server):
    llm_server.push(
        tool_calls(call("python_execute", {"code": "print(6 * 7)"}), content="Computing."),
        tool_calls(call("terminate", {"status": "success"}), content="The answer is 42."),
    )
    cfg = write_config(tmp_path, llm_server.base_url)
    proc = run_main(tmp_path, "-p", "six times seven", "-c", str(cfg), "-w", str(workspace))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "The answer is 42.\n"
    assert "Observed output" in llm_server.requests[1].body["messages"][-2]["content"]


def test_max_steps_prints_no_step_log_on_stdout(tmp_path, workspace, llm_server):
    llm_server.push(
        *[
            tool_calls(call("python_execute", {"code": f"print({i})"}), content=f"Trying {i}.")
            for i in range(2)
        ]
    )
    cfg = write_config(tmp_path, llm_server.base_url)
    proc = run_main(
        tmp_path, "-p", "loop", "-c", str(cfg), "-w", str(workspace), "--max-steps", "2"
    )
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert "error: stopped at max_steps=2 without finishing the task" in proc.stderr
    assert "(stop reason: max_steps)" in proc.stderr


def test_empty_replies_fail_with_their_reason(tmp_path, workspace, llm_server):
    llm_server.push(text(""), text(""), text(""))
    cfg = write_config(tmp_path, llm_server.base_url)
    proc = run_main(tmp_path, "-p", "hi", "-c", str(cfg), "-w", str(workspace), "--quiet")
    assert proc.returncode == 1 and proc.stdout == ""
    assert "error: the model returned 3 empty replies in a row" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(llm_server.requests) == 3


def test_an_answer_cut_at_max_tokens_is_not_success(tmp_path, workspace, llm_server):
    llm_server.push(*[text(f"Part {i} of a long", finish_reason="length") for i in range(3)])
    cfg = write_config(tmp_path, llm_server.base_url)
    proc = run_main(tmp_path, "-p", "write an essay", "-c", str(cfg), "-w", str(workspace))
    assert proc.returncode == 1 and proc.stdout == ""
    assert "the answer was cut at max_tokens" in proc.stderr
    assert "(stop reason: truncated)" in proc.stderr
