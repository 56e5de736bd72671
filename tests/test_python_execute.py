"""python_execute: real child interpreters, real process groups, real sockets on 127.0.0.1."""

from __future__ import annotations

import asyncio
import re
import resource
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from app.sandbox.processes import OutputBuffer, compose_streams
from app.tool.python_execute import PythonExecute
from app.tool.tool_collection import ToolCollection
from tests.proc_utils import alive as _alive
from tests.proc_utils import live_group_members as _live_group_members
from tests.proc_utils import processes_in as _processes_in

pytestmark = pytest.mark.e2e

#: Period of the ticker that measures event-loop latency while code runs.
TICK_SECONDS = 0.01


def _numbers(text: str, label: str) -> list[int]:
    return [int(n) for n in re.findall(rf"{label}=(\d+)", text)]


@pytest.fixture
def tool(tmp_path: Path) -> PythonExecute:
    return PythonExecute(workspace=tmp_path)


@pytest.fixture(autouse=True)
def _no_leftovers(tmp_path: Path):
    """Whatever a test started in its workspace must be gone when the tool call returned."""
    yield
    assert _processes_in(tmp_path) == []


@pytest.fixture
async def inbox() -> AsyncIterator[tuple[int, asyncio.Queue[tuple[str, asyncio.StreamWriter]]]]:
    """A TCP server on 127.0.0.1: child code reports to it, the test waits on the queue."""
    queue: asyncio.Queue[tuple[str, asyncio.StreamWriter]] = asyncio.Queue()
    writers: list[asyncio.StreamWriter] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        line = await reader.readline()
        await queue.put((line.decode().strip(), writer))

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    yield port, queue
    for writer in writers:
        writer.close()
    server.close()
    await server.wait_closed()


# --- basics ----------------------------------------------------------------------------------


async def test_schema_matches_upstream(tool: PythonExecute) -> None:
    fn = tool.to_param()["function"]
    assert fn["name"] == "python_execute"
    assert fn["parameters"]["required"] == ["code"]
    assert set(fn["parameters"]["properties"]) == {"code", "timeout"}
    assert fn["parameters"]["properties"]["timeout"]["type"] == "integer"


async def test_prints_are_returned(tool: PythonExecute) -> None:
    result = await tool.execute(code="print('hello')\nprint(6 * 7)\nprint('héllo ✓')")
    assert result == {"observation": "hello\n42\nhéllo ✓", "success": True}


async def test_stderr_is_captured_and_labelled(tool: PythonExecute) -> None:
    code = "import sys\nprint('out')\nprint('careful', file=sys.stderr)"
    result = await tool.execute(code=code)
    assert result["success"] is True
    assert result["observation"] == "out\n[stderr]\ncareful"


async def test_exception_gives_traceback_and_failure(tool: PythonExecute) -> None:
    code = "print('before')\ndef f():\n    raise ValueError('boom')\nf()\n"
    result = await tool.execute(code=code)
    obs = result["observation"]
    assert result["success"] is False
    assert obs.startswith("before\n[stderr]\nTraceback (most recent call last):")
    assert "raise ValueError('boom')" in obs  # the snippet's own source line
    assert "ValueError: boom" in obs
    assert "_openmanus_bootstrap" not in obs  # our bootstrap frame is hidden


async def test_syntax_error(tool: PythonExecute) -> None:
    result = await tool.execute(code="x = (1,\nprint(x)")
    assert result["success"] is False
    assert "SyntaxError" in result["observation"]
    assert '"<python_execute>", line 1' in result["observation"]


async def test_exit_codes(tool: PythonExecute) -> None:
    failed = await tool.execute(code="import sys\nsys.exit(3)")
    assert failed == {"observation": "[exit code: 3]", "success": False}
    ok = await tool.execute(code="import sys\nprint('bye')\nsys.exit(0)")
    assert ok == {"observation": "bye", "success": True}


async def test_cwd_is_the_workspace(tool: PythonExecute, tmp_path: Path) -> None:
    code = "import os\nprint(os.getcwd())\nopen('made.txt', 'w').write('x')"
    result = await tool.execute(code=code)
    assert result == {"observation": str(tmp_path), "success": True}
    assert (tmp_path / "made.txt").read_text() == "x"


async def test_input_sees_end_of_file_instead_of_hanging(tool: PythonExecute) -> None:
    started = time.monotonic()
    result = await tool.execute(code="input('name? ')", timeout=20)
    assert time.monotonic() - started < 10
    assert result["success"] is False
    assert "EOFError" in result["observation"]


async def test_missing_code_and_bad_timeout_are_errors(tool: PythonExecute) -> None:
    tools = ToolCollection(tool)
    missing = await tools.execute(name="python_execute", tool_input={})
    assert missing.failed and "- code: missing required argument" in missing.error
    for bad in ("soon", 2.5, [1]):
        wrong = await tools.execute(
            name="python_execute", tool_input={"code": "print(1)", "timeout": bad}
        )
        assert wrong.failed and "- timeout: expected integer, got " in wrong.error
    for useless in (-1, 0):  # integers the schema allows, but no use as a timeout
        result = await tool.execute(code="print(1)", timeout=useless)
        assert result["success"] is False
        assert "timeout" in result["observation"]
    ok = await tools.execute(name="python_execute", tool_input={"code": "print(1)", "timeout": "3"})
    assert ok.output == {"observation": "1", "success": True} and not ok.failed
    # A failed run reaches the agent as a result marked is_error (the one failure channel);
    # upstream's dict is still what execute() returns.
    crash = await tools.execute(name="python_execute", tool_input={"code": "raise SystemExit(3)"})
    assert crash.failed and crash.output == {"observation": "[exit code: 3]", "success": False}


# --- limits ----------------------------------------------------------------------------------


async def test_timeout_kills_an_infinite_loop_promptly(tool: PythonExecute) -> None:
    code = "import os\nprint(f'pid={os.getpid()}')\nwhile True:\n    pass\n"
    started = time.monotonic()
    result = await tool.execute(code=code, timeout=1)
    elapsed = time.monotonic() - started
    obs = result["observation"]
    assert result["success"] is False
    assert obs.startswith("Execution timed out after 1 seconds")
    assert elapsed < 1 + tool.kill_grace + 2
    [pid] = _numbers(obs, "pid")  # output printed before the timeout is kept
    assert not _alive(pid)


async def test_timeout_kills_the_whole_group_even_if_sigterm_is_ignored(
    tool: PythonExecute,
) -> None:
    code = (
        "import os, signal, subprocess\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "child = subprocess.Popen(['sleep', '60'])\n"
        "print(f'pid={os.getpid()} child={child.pid}')\n"
        "while True:\n    pass\n"
    )
    result = await tool.execute(code=code, timeout=1)
    assert result["success"] is False
    [pid] = _numbers(result["observation"], "pid")
    [child] = _numbers(result["observation"], "child")
    assert not _alive(pid)
    assert not _alive(child)
    assert _live_group_members(pid) == []


async def test_per_call_timeout_is_bounded_by_max_timeout(tmp_path: Path) -> None:
    tool = PythonExecute(workspace=tmp_path, max_timeout=1)
    started = time.monotonic()
    result = await tool.execute(code="while True:\n    pass", timeout=3600)
    assert time.monotonic() - started < 5
    assert result["observation"].startswith("Execution timed out after 1 seconds")


async def test_background_children_do_not_outlive_a_successful_run(tool: PythonExecute) -> None:
    code = (
        "import os, subprocess\n"
        "child = subprocess.Popen(['sleep', '60'])\n"
        "print(f'pid={os.getpid()} child={child.pid}')\n"
    )
    result = await tool.execute(code=code)
    assert result["success"] is True
    [pid] = _numbers(result["observation"], "pid")
    [child] = _numbers(result["observation"], "child")
    assert not _alive(child)
    assert _live_group_members(pid) == []


async def test_fork_bomb_is_stopped_by_the_process_limit(tmp_path: Path) -> None:
    # Bounded on purpose: at most 2**9 = 512 processes even if the watchdog failed, each
    # blocked on a pipe nobody writes to. The limit (32) must stop it long before the timeout.
    tool = PythonExecute(workspace=tmp_path, max_processes=32)
    code = (
        "import os\n"
        "print(f'pid={os.getpid()}', flush=True)\n"
        "r, w = os.pipe()\n"
        "for _ in range(9):\n"
        "    os.fork()\n"
        "os.read(r, 1)\n"
    )
    started = time.monotonic()
    result = await tool.execute(code=code, timeout=60)
    assert time.monotonic() - started < 20
    obs = result["observation"]
    assert result["success"] is False
    assert "limit of 32 processes" in obs
    [pid] = _numbers(obs, "pid")
    assert _live_group_members(pid) == []


async def test_huge_allocation_fails_cleanly(tool: PythonExecute) -> None:
    result = await tool.execute(code="data = bytearray(10 * 1024**3)\nprint('allocated')")
    obs = result["observation"]
    assert result["success"] is False
    assert "MemoryError" in obs
    assert "[memory limit: " in obs and "of data per process]" in obs  # [sandbox] memory_limit
    assert "allocated" not in obs
    assert (await tool.execute(code="print('still fine')"))["success"] is True


async def test_cpu_time_limit(tmp_path: Path) -> None:
    tool = PythonExecute(workspace=tmp_path, cpu_time_limit=1)
    started = time.monotonic()
    result = await tool.execute(code="while True:\n    pass", timeout=30)
    assert time.monotonic() - started < 15
    assert result["success"] is False
    assert "SIGXCPU" in result["observation"]
    assert "CPU time limit of 1 seconds" in result["observation"]


async def test_file_size_limit(tmp_path: Path) -> None:
    tool = PythonExecute(workspace=tmp_path, file_size_limit=4096)
    result = await tool.execute(code="open('big.bin', 'wb').write(b'x' * 100_000)")
    assert result["success"] is False
    assert "File too large" in result["observation"]
    assert "[file size limit: 4 KiB]" in result["observation"]
    assert (tmp_path / "big.bin").stat().st_size <= 4096


async def test_100_mb_of_output_is_truncated_in_bounded_memory(tool: PythonExecute) -> None:
    total = 100 * 1024 * 1024
    code = (
        "import sys\n"
        "chunk = 'x' * (1024 * 1024)\n"
        "for _ in range(100):\n"
        "    sys.stdout.write(chunk)\n"
        "print('THE END')\n"
        "print('stderr survives the flood', file=sys.stderr)\n"
    )
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    result = await tool.execute(code=code, timeout=60)
    peak_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    obs = result["observation"]
    assert result["success"] is True
    assert len(obs) < tool.max_output_chars + 300
    match = re.search(r"\n\.\.\. \[output truncated: (\d+) more characters\] \.\.\.\n", obs)
    assert match is not None
    stdout_part = obs.split("\n[stderr]\n")[0]
    shown = len(stdout_part) - len(match.group(0))
    assert int(match.group(1)) + shown == total + len("THE END\n") - 1  # rstrip("\n")
    assert stdout_part.endswith("THE END")
    assert obs.endswith("[stderr]\nstderr survives the flood")
    assert peak_after - peak_before < 64 * 1024  # never held 100 MB


# --- concurrency and cancellation ------------------------------------------------------------


async def test_two_calls_run_concurrently_without_blocking_the_loop(
    tool: PythonExecute, inbox: tuple[int, asyncio.Queue]
) -> None:
    port, queue = inbox
    code = (
        "import socket\n"
        f"s = socket.create_connection(('127.0.0.1', {port}))\n"
        "s.sendall(b'waiting\\n')\n"
        "print('released' if s.recv(2) == b'go' else 'no')\n"
    )
    gaps: list[float] = []

    async def ticker() -> None:
        last = time.monotonic()
        while True:
            # Measuring the loop's latency is the point of this sleep.
            await asyncio.sleep(TICK_SECONDS)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    ticking = asyncio.create_task(ticker())
    calls = [asyncio.create_task(tool.execute(code=code, timeout=30)) for _ in range(2)]
    # Both children must be running at the same time to get here: each waits for "go".
    arrivals = [await asyncio.wait_for(queue.get(), 20) for _ in range(2)]
    for _, writer in arrivals:
        writer.write(b"go")
        await writer.drain()
    results = await asyncio.wait_for(asyncio.gather(*calls), 20)
    ticking.cancel()
    assert [r["observation"] for r in results] == ["released", "released"]
    assert gaps and max(gaps) < 0.5


async def test_cancellation_kills_the_child_and_its_group(
    tool: PythonExecute, inbox: tuple[int, asyncio.Queue]
) -> None:
    port, queue = inbox
    code = (
        "import os, socket, subprocess\n"
        "child = subprocess.Popen(['sleep', '60'])\n"
        f"s = socket.create_connection(('127.0.0.1', {port}))\n"
        "s.sendall(f'{os.getpid()} {child.pid}\\n'.encode())\n"
        "s.recv(1)\n"
    )
    task = asyncio.create_task(tool.execute(code=code, timeout=60))
    line, _ = await asyncio.wait_for(queue.get(), 20)
    pid, child = (int(n) for n in line.split())
    assert _alive(pid) and _alive(child)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not _alive(pid)
    assert not _alive(child)
    assert _live_group_members(pid) == []


async def test_child_does_not_inherit_an_ignored_sigint(tool: PythonExecute) -> None:
    code = "import signal\nprint(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        result = await tool.execute(code=code)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert result == {"observation": "True", "success": True}


async def test_uses_the_project_interpreter(tool: PythonExecute) -> None:
    result = await tool.execute(code="import sys\nprint(sys.executable)")
    assert result == {"observation": sys.executable, "success": True}


# --- the bounded output buffer ---------------------------------------------------------------


def test_output_buffer_keeps_head_and_tail_and_counts_the_rest() -> None:
    buffer = OutputBuffer(head_chars=10, tail_chars=5)
    data = "é✓".encode() * 50  # multi-byte characters, fed one byte at a time
    for i in range(len(data)):
        buffer.feed(data[i : i + 1])
    buffer.close()
    assert buffer.total == 100 and buffer.truncated
    text = buffer.render(12)
    assert text == "é✓é✓é✓é✓é\n... [output truncated: 88 more characters] ...\n✓é✓"
    small = OutputBuffer(head_chars=10, tail_chars=5)
    small.feed(b"ok \xff")
    small.close()
    assert small.render(100) == "ok \ufffd"


def test_a_flood_on_stdout_leaves_room_for_stderr() -> None:
    out, err = OutputBuffer(1000, 250), OutputBuffer(1000, 250)
    out.add_text("o" * 100_000)
    err.add_text("Traceback: boom")
    out_text, err_text = compose_streams(out, err, 1000)
    assert err_text == "Traceback: boom"
    assert out_text.startswith("o" * 700) and "[output truncated:" in out_text
