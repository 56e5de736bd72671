"""``ask_human``: the model asks a person through a pluggable *input provider*; when nobody
can answer (no terminal, end of input, timeout) it is told to go on, never left hanging."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import sys
import threading
from collections.abc import Awaitable, Callable, Iterable
from typing import IO, Any, ClassVar, Protocol, runtime_checkable

from pydantic import Field

from app.exceptions import ToolError
from app.tool.base import BaseTool, ToolResult
from app.tool.declared import ToolArgs

#: What the model reads when no answer can be had.
NO_HUMAN_MESSAGE = (
    "No human is available to answer right now; proceed on your own judgement, state the "
    "assumptions you make, and do not ask again for the same thing."
)

_DESCRIPTION = (
    "Ask the human user a question and wait for the reply. Use it only when you cannot "
    "continue without information or a decision that only the user has (a missing detail, a "
    "choice between options, approval of a risky step). Ask one clear, self-contained question. "
    "If nobody is available you are told so, and must carry on with your best judgement."
)


@runtime_checkable
class InputProvider(Protocol):
    """Something that can put a question to a person; ``None`` means nobody can answer."""

    async def ask(self, question: str) -> str | None:
        """Return the person's answer, or None when no answer can be obtained."""


class StdinInputProvider:
    """The terminal: writes the question to ``output`` (stderr, keeping stdout for the
    program's output) and reads one line with ``loop.add_reader``, so the loop keeps running
    and a cancelled question leaves nothing blocked. No terminal (with ``require_tty``), a
    closed input or end of file: ``ask`` returns None at once.
    """

    def __init__(
        self,
        stdin: IO[Any] | int | None = None,
        output: IO[str] | None = None,
        *,
        require_tty: bool = True,
    ) -> None:
        self._stdin = stdin
        self._output = output
        self.require_tty = require_tty
        self._buffer = bytearray()
        self._eof = False
        self._lock: asyncio.Lock | None = None
        self._lock_loop: asyncio.AbstractEventLoop | None = None

    def _fd(self) -> int | None:
        source = self._stdin if self._stdin is not None else sys.stdin
        if isinstance(source, int):
            return source
        try:
            return source.fileno() if source is not None else None
        except (AttributeError, OSError, ValueError):
            return None  # e.g. replaced by a test runner, or closed

    def _write(self, text: str) -> None:
        out = self._output if self._output is not None else sys.stderr
        if out is None:
            return
        with contextlib.suppress(OSError, ValueError):
            out.write(text)
            out.flush()

    def _get_lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock_loop is not loop:
            self._lock, self._lock_loop = asyncio.Lock(), loop
        return self._lock

    def _take_line(self, at_end: bool = False) -> str | None:
        """The next buffered line; ``at_end``: else what is left (a last line without newline)."""
        index = self._buffer.find(b"\n")
        if index < 0:
            if not (at_end and self._buffer):
                return None
            rest = bytes(self._buffer).decode("utf-8", "replace")
            self._buffer.clear()
            return rest
        line = bytes(self._buffer[:index])
        del self._buffer[: index + 1]
        return line.decode("utf-8", "replace").removesuffix("\r")

    async def ask(self, question: str) -> str | None:
        """Show the question and await one line; None if no person can answer."""
        fd = self._fd()
        if fd is None or self._eof:
            return None
        try:
            interactive = os.isatty(fd)
        except OSError:
            return None
        if self.require_tty and not interactive:
            return None
        return await self.read_line(f"\n[ask_human] The agent asks:\n{question}\n> ")

    async def read_line(self, prompt: str = "") -> str | None:
        """Show ``prompt`` and await one line, terminal or not; None at end of input. main.py's
        task prompt reads through this too: one buffer with ``ask_human``, no line lost."""
        async with self._get_lock():
            if prompt:
                self._write(prompt)
            line = self._take_line()
            if line is not None:
                return line
            fd = self._fd()
            if fd is None or self._eof:
                return self._take_line(at_end=True)
            return await self._read_line(fd)

    async def _read_line(self, fd: int) -> str | None:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()

        def take(chunk: bytes) -> None:
            if not chunk:
                self._eof = True
            else:
                self._buffer += chunk
            if (self._eof or b"\n" in self._buffer) and not done.done():
                done.set_result(None)

        def on_readable() -> None:
            try:
                chunk = os.read(fd, 4096)
            except BlockingIOError:
                return  # spurious wake-up
            except OSError:
                chunk = b""  # e.g. EIO once the other side of a pty is gone
            take(chunk)

        def reader() -> None:
            chunk = b"-"
            while chunk and not chunk.endswith(b"\n"):
                try:
                    chunk = os.read(fd, 4096)
                except OSError:
                    chunk = b""
                with contextlib.suppress(RuntimeError):  # the loop is gone: nobody asks
                    loop.call_soon_threadsafe(take, chunk)

        try:
            loop.add_reader(fd, on_readable)
        except (NotImplementedError, ValueError, OSError):
            # No add_reader (Windows proactor, regular files): a daemon thread reads, so an
            # abandoned question never keeps the interpreter from exiting.
            threading.Thread(target=reader, name="ask-human-stdin", daemon=True).start()
            await done
        else:
            try:
                await done
            finally:
                loop.remove_reader(fd)
        return self._take_line(at_end=True)


class CallbackInputProvider:
    """Answers come from a function (sync or async), e.g. a UI dialog. A sync callback runs on
    the loop, so it must return quickly: ``run_in_thread=True`` for one that blocks."""

    def __init__(
        self,
        callback: Callable[[str], str | Awaitable[str | None] | None],
        *,
        run_in_thread: bool = False,
    ) -> None:
        self.callback = callback
        self.run_in_thread = run_in_thread

    async def ask(self, question: str) -> str | None:
        """Call the callback and await its answer if it returned an awaitable."""
        if self.run_in_thread:
            result = await asyncio.to_thread(self.callback, question)
        else:
            result = self.callback(question)
        if inspect.isawaitable(result):
            result = await result
        return result


class QueueInputProvider:
    """Questions go out on one asyncio queue (``questions``), replies come back on another
    (``answers``, may be queued in advance; ``None``: nobody will answer this one)."""

    def __init__(self, answers: Iterable[str | None] = ()) -> None:
        self.questions: asyncio.Queue[str] = asyncio.Queue()
        self.answers: asyncio.Queue[str | None] = asyncio.Queue()
        for answer in answers:
            self.answers.put_nowait(answer)

    def answer(self, text: str | None) -> None:
        """Queue a reply for the current or next question."""
        self.answers.put_nowait(text)

    async def next_question(self) -> str:
        """Wait for the next question the agent asks."""
        return await self.questions.get()

    async def ask(self, question: str) -> str | None:
        """Publish the question, then wait for a reply."""
        self.questions.put_nowait(question)
        return await self.answers.get()


_default_provider: InputProvider | None = None
_stdin_provider: StdinInputProvider | None = None


def set_input_provider(provider: InputProvider | None) -> None:
    """Set the process-wide provider used by ``AskHuman`` tools without their own; None resets
    to the terminal."""
    global _default_provider
    if provider is not None and not isinstance(provider, InputProvider):
        raise TypeError("an input provider needs an `async def ask(question) -> str | None`")
    _default_provider = provider


def get_input_provider() -> InputProvider:
    """The process-wide provider: the one set, else a shared terminal provider."""
    global _stdin_provider
    if _default_provider is not None:
        return _default_provider
    if _stdin_provider is None:
        _stdin_provider = StdinInputProvider()
    return _stdin_provider


class AskHumanArgs(ToolArgs):
    inquire: str = Field(
        description="The question for the user, complete enough to answer without further context."
    )


class AskHuman(BaseTool):
    """Ask the user a question; the answer (or "nobody is there") goes back to the model."""

    name: str = "ask_human"
    description: str = _DESCRIPTION
    Args: ClassVar[type[ToolArgs]] = AskHumanArgs

    #: Overrides the process-wide provider for this tool only.
    input_provider: InputProvider | None = None
    #: Seconds to wait for an answer; None waits as long as it takes.
    timeout: float | None = None

    async def execute(self, inquire: str = "", **kwargs: Any) -> ToolResult:
        """Ask and return the answer, or a "no human available" result; never hangs on no one."""
        if not inquire.strip():  # a blank question: the schema cannot say "not blank"
            raise ToolError("`inquire` is required: the question to ask the user.")
        provider = self.input_provider or get_input_provider()
        try:
            answer = await asyncio.wait_for(provider.ask(inquire.strip()), self.timeout)
        except TimeoutError:
            return ToolResult(
                output=f"The user did not answer within {self.timeout:g} seconds. "
                + NO_HUMAN_MESSAGE
            )
        except Exception as exc:  # a provider's failure must not end the run
            raise ToolError(f"Could not get an answer from the user: {exc}") from exc
        if answer is None:
            return ToolResult(output=NO_HUMAN_MESSAGE)
        answer = answer.strip()
        if not answer:
            return ToolResult(output="The user replied with an empty answer.")
        return ToolResult(output=answer)
