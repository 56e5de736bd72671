"""What the terminal programs share: set-up, exit codes and the session loop (their shared
options are in :mod:`app.cli.options`).

A ``TerminalSession`` reads tasks (one ``--prompt`` or one per input line), runs each as an
asyncio task and handles signals: Ctrl-C stops the running task and returns to the prompt,
Ctrl-C at the prompt (or twice) quits. Progress goes to stderr, answers to stdout.

A task cut short by Ctrl-C is recorded as ``interrupted`` and ``--resume`` carries it on.
Bad input (an empty task, an unknown ``--resume`` id) is refused before anything is built,
and a reader of stdout that goes away (``| head -1``) ends the output quietly.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.text import clean_text

if TYPE_CHECKING:
    from app.events import EventBus
    from app.llm.usage import Usage
    from app.session import SessionData, SessionRecorder

__all__ = [
    "EXIT_CONFIG",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_SESSION_BUSY",
    "EXIT_SESSION_WRITE",
    "EXIT_WORDS",
    "TerminalSession",
    "answer",
    "exit_code_for",
    "say",
    "silence_stdout",
    "stdin_is_tty",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_CONFIG = 2
EXIT_SESSION_BUSY = 3  # --resume of a session another process is running
EXIT_SESSION_WRITE = 4  # the session file could not be written (disk full...)
EXIT_INTERRUPTED = 130
EXIT_WORDS = frozenset({"exit", "quit"})


def exit_code_for(stop_reason: Any) -> int:
    """The exit code of a run that stopped for ``stop_reason`` (a ``StopReason``): 0 only
    when it completed; every failure (max_steps, stuck, empty or cut replies, context
    overflow, LLM error) is 1."""
    return EXIT_OK if str(stop_reason) == "completed" else EXIT_FAILED


class TerminalSession(ABC):
    """One process: set-up, then tasks from ``--prompt`` or stdin, with Ctrl-C handling.

    Subclasses build what runs the tasks (``build``), start one task (``start_task``),
    turn its result into output and an exit code (``report``) and release resources
    (``cleanup``).
    """

    log_name = "openmanus"
    session_kind = "agent"
    exit_words: frozenset[str] = EXIT_WORDS
    banner = "OpenManus ready. Type a task and press Enter; 'exit' or Ctrl-D to leave."

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.task: asyncio.Task[Any] | None = None
        self.main_task: asyncio.Task[Any] | None = None
        self.quitting = False
        self.reader: Any = None
        self.recorder: SessionRecorder | None = None
        self.task_usage: Usage | None = None

    @abstractmethod
    async def build(self) -> None:
        """Create the agents (or flow); ``ConfigError`` means exit code 2."""

    def agent_options(self, *, workspace: bool = True) -> dict[str, Any]:
        """The agent keyword arguments the shared options set: ``--max-steps`` and, unless the
        agent takes its workspace elsewhere, ``--workspace``."""
        options: dict[str, Any] = {}
        if self.args.max_steps is not None:
            options["max_steps"] = self.args.max_steps
        if workspace and self.args.workspace is not None:
            options["workspace"] = self.args.workspace
        return options

    @abstractmethod
    def start_task(self, prompt: str) -> Awaitable[Any]:
        """The awaitable that runs one task."""

    @abstractmethod
    def report(self, result: Any) -> int:
        """Print the task's answer and return its exit code."""

    @abstractmethod
    async def cleanup(self) -> None:
        """Release agents and tools at exit."""

    # ---- sessions (overridden by the programs) ---------------------------------------------------

    def event_bus(self) -> EventBus | None:
        """What the terminal view renders (the agent's or the flow's events)."""
        return None

    def attach_session(self, recorder: SessionRecorder, *, already_written: bool) -> None:
        """Let ``recorder`` record what runs the tasks."""
        return None

    def restore_session(self, data: SessionData) -> None:
        """Put the agents (and plan) back as the session file has them."""
        return None

    def continue_task(self) -> Awaitable[Any]:
        """The awaitable that carries on a task cut short in a resumed session."""
        raise NotImplementedError

    def session_header(self) -> dict[str, Any]:
        return {}

    # ---- signals -------------------------------------------------------------------------------

    def _on_sigint(self) -> None:
        if self.task is not None and not self.task.done() and not self.quitting:
            if self.task.cancelling():
                self._quit()  # second Ctrl-C while the task is still stopping
                return
            say("\n⏹  Stopping the task... (press Ctrl-C again to quit)")
            self.task.cancel()
            return
        self._quit()

    def _quit(self) -> None:
        self.quitting = True
        if self.task is not None and not self.task.done():
            self.task.cancel()
        if self.main_task is not None and not self.main_task.done():
            self.main_task.cancel()

    # ---- the program ---------------------------------------------------------------------------

    async def run(self) -> int:
        from app.exceptions import (
            ConfigError,
            MCPServerError,
            ReplayError,
            SessionBusyError,
            SessionError,
        )

        if getattr(self.args, "list_sessions", False):
            return self._list_sessions()
        if self.args.prompt is not None and not self.args.prompt.strip():
            say("error: the prompt is empty")  # before any set-up: nothing built, no session
            return EXIT_CONFIG
        self.main_task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signal.SIGINT, self._on_sigint)
            loop.add_signal_handler(signal.SIGTERM, self._quit)
        tape: contextlib.ExitStack = contextlib.ExitStack()
        try:
            try:
                self._setup()
                self._check_resume()
                self._start_tape(tape)
                await self.build()
                resumed = self._open_session()
                self._watch()
            except SessionBusyError as e:
                say(f"error: {e}")
                return EXIT_SESSION_BUSY
            except (ConfigError, SessionError, ReplayError) as e:
                say(f"error: {e}")
                return EXIT_CONFIG
            except MCPServerError as e:  # run_mcp.py: the server cannot be reached
                say(f"error: {e}")
                return EXIT_FAILED
            if resumed is not None:
                code = await self._carry_on(resumed)
                if self.args.prompt is None and resumed.incomplete:
                    return code
            if self.args.prompt is not None:
                return await self._one_shot(self.args.prompt)
            return await self._interactive()
        except asyncio.CancelledError:
            return EXIT_INTERRUPTED
        finally:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(self.cleanup(), timeout=10)
            if self.recorder is not None:
                with contextlib.suppress(Exception, asyncio.CancelledError):
                    await self.recorder.close()
            tape.close()
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(signal.SIGINT)
                loop.remove_signal_handler(signal.SIGTERM)

    # ---- sessions, recording, the terminal view --------------------------------------------------

    def workspace(self) -> Path:
        """The directory the agents work in (sessions live in its ``.sessions``)."""
        if self.args.workspace is not None:
            return Path(self.args.workspace).expanduser().absolute()
        from app.config import config

        return config.workspace_root

    def _check_resume(self) -> None:
        """An unknown ``--resume`` id is an error before the agents (and MCP servers) are
        built, so a typo costs nothing and leaves no session file behind."""
        resume = getattr(self.args, "resume", None)
        if resume and not getattr(self.args, "no_session", False):
            from app.session import SessionStore

            SessionStore.for_workspace(self.workspace()).find(resume)

    def _list_sessions(self) -> int:
        import time

        from app.config import config
        from app.exceptions import ConfigError, SessionError
        from app.session import SessionStore

        if self.args.config is not None:
            with contextlib.suppress(ConfigError):
                config.load(self.args.config)
        store = SessionStore.for_workspace(self.workspace())
        try:
            infos = store.list(limit=20)
        except (SessionError, OSError) as e:
            say(f"error: {e}")
            return EXIT_CONFIG
        if not infos:
            say(f"No sessions in {store.directory}")
            return EXIT_OK
        try:
            for info in infos:
                when = time.strftime("%Y-%m-%d %H:%M", time.localtime(info.updated))
                prompt = " ".join((info.first_prompt or "").split())
                prompt = prompt if len(prompt) <= 60 else prompt[:59] + "…"
                damaged = f"  ({'; '.join(info.problems)})" if info.problems else ""
                print(
                    f"{info.id}  {when}  {info.kind:<5}  {info.state:<11}  {prompt}{damaged}",
                    flush=True,
                )
        except BrokenPipeError:  # `--list-sessions | head -1`: the reader has what it wanted
            silence_stdout()
        return EXIT_OK

    def _start_tape(self, stack: contextlib.ExitStack) -> None:
        """``--record``/``--replay``: every task (started from here) inherits the tape."""
        from app.llm.recording import recording, replaying

        if getattr(self.args, "record", None):
            stack.enter_context(recording(self.args.record))
        elif getattr(self.args, "replay", None):
            stack.enter_context(replaying(self.args.replay, strict=bool(self.args.strict_replay)))

    def _open_session(self) -> SessionData | None:
        """Start (or, with ``--resume``, reopen and restore) the session file."""
        if getattr(self.args, "no_session", False):
            return None
        from app.exceptions import SessionWriteError
        from app.session import SessionStore

        store = SessionStore.for_workspace(self.workspace())
        resume = getattr(self.args, "resume", None)
        if resume:
            data, self.recorder = store.resume(resume)  # locked until the program ends
            for problem in data.problems:
                say(f"warning: session {data.id}: {problem}")
            self.restore_session(data)
            self.attach_session(self.recorder, already_written=True)
            say(f"Resumed session {data.id} ({data.state}; {self.recorder.path})")
            return data
        try:
            self.recorder = store.start(
                self.session_kind,
                program=self.log_name,
                workspace=str(self.workspace()),
                **self.session_header(),
            )
        except (OSError, SessionWriteError) as e:  # nothing is lost yet: run without one
            say(f"warning: no session file ({e})")
            return None
        self.attach_session(self.recorder, already_written=False)
        if not self.args.quiet:
            say(f"Session {self.recorder.session_id} ({self.recorder.path})")
        return None

    def _watch(self) -> None:
        """Render progress from the events, unless ``--quiet``."""
        bus = self.event_bus()
        if bus is None or self.args.quiet:
            return
        from app.cli.render import EventRenderer

        bus.subscribe(
            EventRenderer(
                show_source=self.session_kind == "flow", show_usage=bool(self.args.verbose)
            )
        )

    async def _carry_on(self, data: SessionData) -> int:
        if not data.incomplete:
            return EXIT_OK
        say("Carrying on the task that was cut short...")
        return await self._run_task(None, self.continue_task)

    def _setup(self) -> None:
        from app.config import config
        from app.logger import define_log_level
        from app.tool.ask_human import StdinInputProvider, set_input_provider

        level = "DEBUG" if self.args.verbose else "WARNING" if self.args.quiet else "INFO"
        log_dir = os.environ.get("OPENMANUS_LOG_DIR") or None
        define_log_level(
            print_level=level,
            name=self.log_name,
            compact=True,
            log_dir=Path(log_dir) if log_dir else None,
        )
        config.load(self.args.config)
        config.llm  # noqa: B018 - validate the LLM section now, with one clear message
        self.reader = StdinInputProvider()
        set_input_provider(self.reader)

    async def _run_task(
        self, prompt: str | None, start: Callable[[], Awaitable[Any]] | None = None
    ) -> int:
        """Run one task; returns its exit code. Ctrl-C cancels only this task."""
        from app.llm.context import llm_scope
        from app.llm.usage import Usage

        if self.recorder is not None and prompt is not None:
            self.recorder.note("task", prompt=prompt)
            await self.recorder.flush()
        self.task_usage = Usage()  # every LLM call of the task, whichever agent made it
        with llm_scope(usage=self.task_usage):
            work = start() if start is not None else self.start_task(prompt or "")
            self.task = asyncio.ensure_future(work)
        try:
            result = await self.task
        except asyncio.CancelledError:
            if self.quitting:
                raise
            # Ctrl-C cancelled only the task; the session itself goes on.
            say("Task interrupted.")
            return EXIT_INTERRUPTED
        finally:
            self.task = None
        code = self.report(result)
        return self._session_failure() or code

    def _session_failure(self) -> int | None:
        """A failed session write is an error of the run (its history is incomplete)."""
        if self.recorder is None or self.recorder.error is None:
            return None
        say(f"error: {self.recorder.error}")
        return EXIT_SESSION_WRITE

    async def _one_shot(self, prompt: str) -> int:
        if not prompt.strip():
            say("error: the prompt is empty")
            return EXIT_CONFIG
        return await self._run_task(prompt)

    async def _interactive(self) -> int:
        interactive = stdin_is_tty()
        if interactive:
            say(self.banner)
        prompt = "\nEnter your prompt: " if interactive else ""
        while not self.quitting:
            line = await self.reader.read_line(prompt)
            if line is None:  # end of input
                break
            text = line.strip()
            if not text:
                continue
            if text.lower() in self.exit_words:
                break
            await self._run_task(text)
        if interactive:
            say("Goodbye.")
        if self.quitting:
            return EXIT_INTERRUPTED
        failed = self.recorder is not None and self.recorder.error is not None
        return EXIT_SESSION_WRITE if failed else EXIT_OK


def say(message: str) -> None:
    """A line for the user on stderr (stdout is kept for answers)."""
    print(clean_text(message), file=sys.stderr, flush=True)


def answer(text: str) -> None:
    """A task's answer on stdout. It is the model's text: a lone surrogate in it (which has
    no UTF-8 encoding) is printed as U+FFFD, and a character the terminal's encoding lacks as
    ``?``, rather than failing the run at its very end."""
    text = clean_text(text)
    try:
        try:
            print(text, flush=True)
        except UnicodeEncodeError:
            encoding = sys.stdout.encoding or "utf-8"
            print(text.encode(encoding, "replace").decode(encoding), flush=True)
    except BrokenPipeError:  # `main.py -p ... | head -1`: whoever reads has stopped reading
        silence_stdout()


def silence_stdout() -> None:
    """After the reader of stdout went away (a closed pipe): send the rest, and Python's own
    flush at exit, to /dev/null, so no ``BrokenPipeError`` traceback follows."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def stdin_is_tty() -> bool:
    try:
        return os.isatty(sys.stdin.fileno())
    except (AttributeError, OSError, ValueError):
        return False
