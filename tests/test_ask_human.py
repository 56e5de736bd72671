"""ask_human with real providers: a pty and pipes for the terminal, queues and callbacks."""

from __future__ import annotations

import asyncio
import io
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.exceptions import ToolError
from app.tool import ask_human as ask_human_module
from app.tool.ask_human import (
    NO_HUMAN_MESSAGE,
    AskHuman,
    CallbackInputProvider,
    InputProvider,
    QueueInputProvider,
    StdinInputProvider,
    get_input_provider,
    set_input_provider,
)

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def reset_default_provider() -> Iterator[None]:
    yield
    set_input_provider(None)
    ask_human_module._stdin_provider = None


class SignallingOutput(io.StringIO):
    """Captures what the provider prints and lets a test await the question appearing."""

    def __init__(self) -> None:
        super().__init__()
        self.written = asyncio.Event()

    def write(self, text: str) -> int:
        count = super().write(text)
        self.written.set()
        return count


class Ticker:
    """Counts event-loop turns while a question is pending: proof the loop is not blocked."""

    def __init__(self, wanted: int) -> None:
        self.ticks = 0
        self.wanted = wanted
        self.reached = asyncio.Event()
        self._handle: asyncio.Handle | None = None

    def start(self) -> None:
        self._handle = asyncio.get_running_loop().call_soon(self._tick)

    def _tick(self) -> None:
        self.ticks += 1
        if self.ticks >= self.wanted:
            self.reached.set()
        self._handle = asyncio.get_running_loop().call_soon(self._tick)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()


class Fds:
    """File descriptors a test owns; closed once, even if the test closed some already."""

    def __init__(self, *fds: int) -> None:
        self.open = set(fds)

    def close(self, fd: int) -> None:
        if fd in self.open:
            self.open.discard(fd)
            os.close(fd)

    def close_all(self) -> None:
        for fd in list(self.open):
            self.close(fd)


@pytest.fixture
def pty_fds() -> Iterator[tuple[Fds, int, int]]:
    master, slave = os.openpty()
    fds = Fds(master, slave)
    yield fds, master, slave
    fds.close_all()


@pytest.fixture
def pipe_fds() -> Iterator[tuple[Fds, int, int]]:
    read_fd, write_fd = os.pipe()
    fds = Fds(read_fd, write_fd)
    yield fds, read_fd, write_fd
    fds.close_all()


def test_schema() -> None:
    param = AskHuman().to_param()["function"]
    assert param["name"] == "ask_human"
    assert param["parameters"]["required"] == ["inquire"]
    assert param["parameters"]["properties"]["inquire"]["type"] == "string"


async def test_queue_provider_round_trip() -> None:
    provider = QueueInputProvider()
    tool = AskHuman(input_provider=provider)
    task = asyncio.create_task(tool.execute(inquire="  Which database should I use?  "))
    assert await provider.next_question() == "Which database should I use?"
    assert not task.done()
    provider.answer("  PostgreSQL\n")
    result = await task
    assert result.error is None
    assert result.output == "PostgreSQL"


async def test_queue_provider_with_answers_queued_in_advance() -> None:
    tool = AskHuman(input_provider=QueueInputProvider(["yes", None, "   "]))
    assert (await tool.execute(inquire="Proceed?")).output == "yes"
    assert (await tool.execute(inquire="Again?")).output == NO_HUMAN_MESSAGE
    assert "empty answer" in (await tool.execute(inquire="Anything?")).output


async def test_callback_providers_sync_async_and_threaded() -> None:
    seen: list[str] = []

    def sync_cb(question: str) -> str:
        seen.append(question)
        return f"sync:{question}"

    async def async_cb(question: str) -> str | None:
        answer = await asyncio.to_thread(str.upper, question)
        return None if question == "nobody?" else f"async:{answer}"

    assert (
        await AskHuman(input_provider=CallbackInputProvider(sync_cb)).execute(inquire="a")
    ).output == "sync:a"
    tool = AskHuman(input_provider=CallbackInputProvider(async_cb))
    assert (await tool.execute(inquire="b")).output == "async:B"
    assert (await tool.execute(inquire="nobody?")).output == NO_HUMAN_MESSAGE
    threaded = CallbackInputProvider(sync_cb, run_in_thread=True)
    assert (await AskHuman(input_provider=threaded).execute(inquire="c")).output == "sync:c"
    assert seen == ["a", "c"]


async def test_missing_question_is_a_tool_error() -> None:
    tool = AskHuman(input_provider=QueueInputProvider(["unused"]))
    with pytest.raises(ToolError, match="`inquire` is required"):
        await tool.execute()
    with pytest.raises(ToolError, match="`inquire` is required"):
        await tool.execute(inquire="   ")


async def test_failing_provider_becomes_tool_error() -> None:
    def broken(question: str) -> str:
        raise RuntimeError("dialog crashed")

    with pytest.raises(ToolError, match="dialog crashed"):
        await AskHuman(input_provider=CallbackInputProvider(broken)).execute(inquire="q")


async def test_timeout_gives_a_no_human_result() -> None:
    never = asyncio.Event()

    async def wait_forever(question: str) -> str:
        await never.wait()
        return "too late"

    tool = AskHuman(input_provider=CallbackInputProvider(wait_forever), timeout=0.05)
    result = await tool.execute(inquire="hello?")
    assert "did not answer within 0.05 seconds" in result.output
    assert NO_HUMAN_MESSAGE in result.output


async def test_process_wide_provider_and_instance_override() -> None:
    shared = QueueInputProvider(["from shared"])
    set_input_provider(shared)
    assert get_input_provider() is shared
    assert (await AskHuman().execute(inquire="q")).output == "from shared"
    own = QueueInputProvider(["from own"])
    assert (await AskHuman(input_provider=own).execute(inquire="q")).output == "from own"
    set_input_provider(None)
    assert isinstance(get_input_provider(), StdinInputProvider)
    with pytest.raises(TypeError):
        set_input_provider(object())  # type: ignore[arg-type]
    assert isinstance(QueueInputProvider(), InputProvider)


async def test_default_provider_without_terminal_answers_no_human_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A stdin without a file descriptor (replaced by a test runner or an embedding app).
    monkeypatch.setattr(sys, "stdin", io.StringIO("typed ahead\n"))
    result = await asyncio.wait_for(AskHuman().execute(inquire="Are you there?"), 5)
    assert result.output == NO_HUMAN_MESSAGE


@pytest.mark.timeout(20)  # a blocking read would freeze the loop: fail fast, not hang
async def test_pty_answer_while_event_loop_keeps_running(pty_fds: tuple[Fds, int, int]) -> None:
    _, master, slave = pty_fds
    output = SignallingOutput()
    tool = AskHuman(input_provider=StdinInputProvider(stdin=slave, output=output))
    ticker = Ticker(wanted=50)
    ticker.start()
    try:
        task = asyncio.create_task(tool.execute(inquire="Deploy to production?"))
        await asyncio.wait_for(output.written.wait(), 5)
        await asyncio.wait_for(ticker.reached.wait(), 5)
        assert not task.done()
        assert "Deploy to production?" in output.getvalue()
        os.write(master, "yes, go ahead — café\n".encode())
        result = await asyncio.wait_for(task, 5)
    finally:
        ticker.stop()
    assert result.output == "yes, go ahead — café"


async def test_pty_buffered_lines_answer_successive_questions(
    pty_fds: tuple[Fds, int, int],
) -> None:
    _, master, slave = pty_fds
    provider = StdinInputProvider(stdin=slave, output=io.StringIO())
    os.write(master, b"first\n")
    assert await asyncio.wait_for(provider.ask("one?"), 5) == "first"
    os.write(master, b"second\n")
    assert await asyncio.wait_for(provider.ask("two?"), 5) == "second"


async def test_pty_closed_means_no_human(pty_fds: tuple[Fds, int, int]) -> None:
    fds, master, slave = pty_fds
    output = SignallingOutput()
    tool = AskHuman(input_provider=StdinInputProvider(stdin=slave, output=output))
    task = asyncio.create_task(tool.execute(inquire="Still there?"))
    await asyncio.wait_for(output.written.wait(), 5)
    fds.close(master)
    result = await asyncio.wait_for(task, 5)
    assert result.output == NO_HUMAN_MESSAGE


async def test_cancelled_question_releases_the_terminal(pty_fds: tuple[Fds, int, int]) -> None:
    _, master, slave = pty_fds
    output = SignallingOutput()
    provider = StdinInputProvider(stdin=slave, output=output)
    task = asyncio.create_task(provider.ask("first?"))
    await asyncio.wait_for(output.written.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    os.write(master, b"later\n")
    assert await asyncio.wait_for(provider.ask("second?"), 5) == "later"


async def test_pipe_is_not_a_human_by_default(pipe_fds: tuple[Fds, int, int]) -> None:
    _, read_fd, write_fd = pipe_fds
    os.write(write_fd, b"scripted answer\n")
    output = io.StringIO()
    provider = StdinInputProvider(stdin=read_fd, output=output)
    assert await asyncio.wait_for(provider.ask("q?"), 5) is None
    assert output.getvalue() == ""  # no question printed to nobody


@pytest.mark.timeout(20)
async def test_pipe_accepted_when_tty_not_required(pipe_fds: tuple[Fds, int, int]) -> None:
    fds, read_fd, write_fd = pipe_fds
    output = SignallingOutput()
    provider = StdinInputProvider(stdin=read_fd, output=output, require_tty=False)
    ticker = Ticker(wanted=50)
    ticker.start()
    try:
        task = asyncio.create_task(provider.ask("first?"))
        await asyncio.wait_for(output.written.wait(), 5)
        await asyncio.wait_for(ticker.reached.wait(), 5)
        assert not task.done()
        os.write(write_fd, b"one\r\ntwo\nthree-without-newline")
        assert await asyncio.wait_for(task, 5) == "one"
    finally:
        ticker.stop()
    assert await asyncio.wait_for(provider.ask("second?"), 5) == "two"
    fds.close(write_fd)
    assert await asyncio.wait_for(provider.ask("third?"), 5) == "three-without-newline"
    assert await asyncio.wait_for(provider.ask("fourth?"), 5) is None


async def test_stdin_file_object_is_accepted(pty_fds: tuple[Fds, int, int]) -> None:
    _, master, slave = pty_fds
    stream = os.fdopen(os.dup(slave), "rb", buffering=0)
    try:
        provider = StdinInputProvider(stdin=stream, output=io.StringIO())
        os.write(master, b"via file object\n")
        assert await asyncio.wait_for(provider.ask("q?"), 5) == "via file object"
    finally:
        stream.close()


@pytest.mark.parametrize("stdin", [subprocess.DEVNULL, subprocess.PIPE])
@pytest.mark.e2e
def test_real_process_without_terminal_does_not_hang(stdin: int) -> None:
    code = (
        "import asyncio\n"
        "from app.tool.ask_human import AskHuman\n"
        "print(asyncio.run(AskHuman().execute(inquire='Anyone?')).output)\n"
    )
    feed = {"input": b"an answer nobody typed\n"} if stdin == subprocess.PIPE else {"stdin": stdin}
    proc = subprocess.run(
        [sys.executable, "-c", code],
        **feed,
        capture_output=True,
        cwd=REPO,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout.decode().strip() == NO_HUMAN_MESSAGE
    assert b"Anyone?" not in proc.stderr
