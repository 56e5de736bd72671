"""bash: a real persistent bash session, real signals and process groups."""

from __future__ import annotations

import asyncio
import re
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from app.tool.base import CLIResult, ToolFailure
from app.tool.bash import Bash
from tests.proc_utils import alive as _alive
from tests.proc_utils import live_group_members as _live_group_members
from tests.proc_utils import processes_in as _processes_in

pytestmark = pytest.mark.e2e


async def _shell_pid(bash: Bash) -> int:
    result = await bash.execute(command="echo $$")
    return int(str(result))


@pytest.fixture
async def bash(tmp_path: Path) -> AsyncIterator[Bash]:
    tool = Bash(workspace=tmp_path, timeout=10)
    yield tool
    shell = tool.session_pid
    await tool.cleanup()
    if shell is not None:
        assert _live_group_members(shell) == []
    assert _processes_in(tmp_path) == []


# --- basics ----------------------------------------------------------------------------------


async def test_schema_matches_upstream(bash: Bash) -> None:
    fn = bash.to_param()["function"]
    assert fn["name"] == "bash"
    assert fn["parameters"]["required"] == ["command"]
    assert fn["parameters"]["properties"]["command"]["type"] == "string"
    assert fn["parameters"]["properties"]["restart"]["type"] == "boolean"


async def test_starts_in_the_workspace_and_keeps_cwd_and_env(bash: Bash, tmp_path: Path) -> None:
    assert str(await bash.execute(command="pwd")) == str(tmp_path)
    (tmp_path / "sub").mkdir()
    assert str(await bash.execute(command="cd sub && export GREETING='hi there'")) == ""
    result = await bash.execute(command='pwd; echo "$GREETING"; bash -c \'echo "$GREETING"\'')
    assert isinstance(result, CLIResult)
    assert result.output == f"{tmp_path / 'sub'}\nhi there\nhi there"


async def test_exit_codes_are_reported(bash: Bash) -> None:
    assert (await bash.execute(command="false")).output == "[exit code: 1]"
    assert (await bash.execute(command="echo $?")).output == "1"  # $? survives our plumbing
    three = await bash.execute(command="f() { echo partial; return 3; }; f")
    assert three.output == "partial\n[exit code: 3]"
    assert (await bash.execute(command="true")).output == ""


async def test_stderr_is_captured_and_labelled(bash: Bash) -> None:
    result = await bash.execute(command="echo out; echo oops >&2; ls /definitely/not/here")
    text = result.output
    assert text.startswith("out\n[stderr]\noops\n")
    assert "No such file or directory" in text
    assert text.endswith("[exit code: 2]")


async def test_quotes_and_multiline_commands_arrive_verbatim(bash: Bash, tmp_path: Path) -> None:
    command = "cat > note.txt <<'EOF'\nit's $HOME and \"quotes\" and !bang\nEOF\ncat note.txt"
    result = await bash.execute(command=command)
    assert result.output == 'it\'s $HOME and "quotes" and !bang'
    syntax = await bash.execute(command="echo (")
    assert "syntax error" in syntax.output
    assert (await bash.execute(command="echo still here")).output == "still here"


async def test_empty_command_is_an_error(bash: Bash) -> None:
    for command in ("", "   \n", None):
        result = await bash.execute(command=command)
        assert isinstance(result, ToolFailure)
        assert "No command given" in str(result)


# --- commands that would hang ----------------------------------------------------------------


async def test_commands_waiting_for_input_get_end_of_file(bash: Bash) -> None:
    started = time.monotonic()
    assert (await bash.execute(command='read x; echo "read=$?"')).output == "read=1"
    assert (await bash.execute(command="cat; echo cat=$?")).output == "cat=0"
    # -S: no site module, so the REPL does not write ~/.python_history.
    repl = await bash.execute(command=f"{sys.executable} -S -i; echo repl=$?")
    assert repl.output.startswith("repl=0")
    assert time.monotonic() - started < 8  # nothing waited for the 10 s timeout


async def test_background_job_does_not_block_and_dies_at_cleanup(bash: Bash) -> None:
    started = time.monotonic()
    result = await bash.execute(command="sleep 60 & echo job=$!")
    assert time.monotonic() - started < 5
    job = int(re.search(r"job=(\d+)", result.output).group(1))
    shell = await _shell_pid(bash)
    assert _alive(job) and _alive(shell)
    await bash.cleanup()
    assert not _alive(job)
    assert not _alive(shell)
    assert bash.session_pid is None
    # Still usable afterwards: a new shell starts.
    assert (await bash.execute(command="echo again")).output == "again"
    assert await _shell_pid(bash) != shell


async def test_timeout_interrupts_and_keeps_the_session(tmp_path: Path, bash: Bash) -> None:
    bash.timeout = 1
    await bash.execute(command="export KEPT=yes; cd /")
    shell = await _shell_pid(bash)
    for command, output in (
        ("echo started; sleep 30; echo after", "\nOutput until then:\nstarted"),
        ("while :; do :; done", "with its working directory and environment."),
    ):
        started = time.monotonic()
        result = await bash.execute(command=command)
        assert time.monotonic() - started < 1 + bash.interrupt_grace + 1
        assert isinstance(result, ToolFailure)
        assert "timed out after 1 seconds and was interrupted" in result.error
        assert result.error.endswith(output)  # "after" never ran: the whole line was dropped
    assert (await bash.execute(command='echo "$KEPT $PWD"')).output == "yes /"
    assert await _shell_pid(bash) == shell


async def test_interrupt_works_even_if_the_agent_ignores_sigint(bash: Bash) -> None:
    # An agent started in the background by a script runs with SIGINT ignored, and ignored
    # signals are inherited across exec: the shell must not inherit that.
    bash.timeout = 1
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        result = await bash.execute(command="sleep 30; echo after")
    finally:
        signal.signal(signal.SIGINT, previous)
    assert isinstance(result, ToolFailure)
    assert "was interrupted" in result.error
    assert (await bash.execute(command="trap")).output == ""  # nothing ignored or trapped


async def test_shell_that_ignores_the_interrupt_is_restarted(bash: Bash, tmp_path: Path) -> None:
    bash.timeout = 1
    bash.interrupt_grace = 1
    await bash.execute(command="export KEPT=yes; cd /")
    shell = await _shell_pid(bash)
    started = time.monotonic()
    result = await bash.execute(command="trap 'echo caught' INT; while :; do :; done")
    assert time.monotonic() - started < 1 + 1 + 3
    assert isinstance(result, ToolFailure)
    text = str(result)
    assert "did not recover" in text
    assert "working directory and environment variables were reset" in text
    assert not _alive(shell)
    assert _live_group_members(shell) == []
    after = await bash.execute(command='echo "[$KEPT]"; pwd')
    assert after.output == f"[]\n{tmp_path}"
    assert await _shell_pid(bash) != shell


async def test_restart(bash: Bash, tmp_path: Path) -> None:
    await bash.execute(command="export KEPT=yes; cd /")
    shell = await _shell_pid(bash)
    result = await bash.execute(command="", restart=True)
    assert "restarted" in str(result)
    assert not _alive(shell)
    assert (await bash.execute(command='echo "[$KEPT]"; pwd')).output == f"[]\n{tmp_path}"
    # restart together with a command: the command runs in the fresh shell.
    await bash.execute(command="cd /")
    assert (await bash.execute(command="pwd", restart=True)).output == str(tmp_path)


async def test_exit_ends_the_shell_and_the_next_call_gets_a_new_one(bash: Bash) -> None:
    shell = await _shell_pid(bash)
    result = await bash.execute(command="echo bye; exit 4")
    assert result.output.startswith("bye\n[the shell exited (exit code: 4)")
    assert not _alive(shell)
    assert (await bash.execute(command="echo hello")).output == "hello"


async def test_redirecting_the_shells_own_output_does_not_break_it(
    bash: Bash, tmp_path: Path
) -> None:
    started = time.monotonic()
    assert (await bash.execute(command="exec > redirected.log; echo hidden")).output == ""
    assert (await bash.execute(command="echo also-hidden; echo shown >&2")).output == (
        "[stderr]\nshown"
    )
    assert time.monotonic() - started < 5
    assert (tmp_path / "redirected.log").read_text() == "hidden\nalso-hidden\n"


async def test_cancellation_kills_the_command(bash: Bash) -> None:
    shell = await _shell_pid(bash)
    server_got: asyncio.Queue[str] = asyncio.Queue()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server_got.put((await reader.readline()).decode().strip())
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        command = f"sleep 60 & echo $! > /dev/tcp/127.0.0.1/{port}; wait"
        task = asyncio.create_task(bash.execute(command=command))
        job = int(await asyncio.wait_for(server_got.get(), 10))
        assert _alive(job)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    finally:
        server.close()
        await server.wait_closed()
    assert not _alive(job)
    assert not _alive(shell)
    assert (await bash.execute(command="echo fresh")).output == "fresh"


# --- output ----------------------------------------------------------------------------------


async def test_huge_output_is_capped_with_a_marker(bash: Bash) -> None:
    result = await bash.execute(command="yes abcdefghi | head -c 50000000; echo; echo END")
    text = result.output
    assert len(text) < bash.max_output_chars + 300
    match = re.search(r"\[output truncated: (\d+) more characters\]", text)
    assert match is not None and int(match.group(1)) > 49_000_000
    assert text.startswith("abcdefghi\nabcdefghi\n")
    assert text.endswith("\nEND")


async def test_binary_output_is_decoded_with_replacement(bash: Bash) -> None:
    result = await bash.execute(command=r"printf 'ok \377\376 done'")
    assert result.output == "ok \ufffd\ufffd done"
    junk = await bash.execute(command="head -c 200000 /dev/urandom")
    assert isinstance(junk.output, str) and "[output truncated" in junk.output
    assert (await bash.execute(command="echo fine")).output == "fine"


async def test_concurrent_calls_on_one_tool_are_serialised(bash: Bash) -> None:
    results = await asyncio.gather(
        *(bash.execute(command=f"echo start-{i}; echo end-{i}") for i in range(5))
    )
    assert [r.output for r in results] == [f"start-{i}\nend-{i}" for i in range(5)]
