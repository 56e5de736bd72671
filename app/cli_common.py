"""What ``main.py`` and ``run_flow.py`` share: options, set-up, exit codes and the session loop.

A ``TerminalSession`` reads tasks (one ``--prompt`` or one per input line), runs each as an
asyncio task and handles signals: Ctrl-C stops the running task and returns to the prompt,
Ctrl-C at the prompt (or twice) quits. Progress goes to stderr, answers to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from abc import ABC, abstractmethod
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

__all__ = [
    "EXIT_CONFIG",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_WORDS",
    "TerminalSession",
    "add_common_options",
    "check_common_args",
    "say",
    "stdin_is_tty",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_CONFIG = 2
EXIT_INTERRUPTED = 130
EXIT_WORDS = frozenset({"exit", "quit"})


def add_common_options(parser: argparse.ArgumentParser, *, max_steps_help: str) -> None:
    """``--config``, ``--max-steps``, ``--workspace``, ``--verbose/--quiet``, ``--version``."""
    parser.add_argument(
        "-c", "--config", type=Path,
        help="config file (default: $OPENMANUS_CONFIG, else config/config.toml)",
    )
    parser.add_argument("--max-steps", type=int, help=max_steps_help)
    parser.add_argument("-w", "--workspace", type=Path, help="directory the agents work in")
    level = parser.add_mutually_exclusive_group()
    level.add_argument("-v", "--verbose", action="store_true", help="show debug output")
    level.add_argument("-q", "--quiet", action="store_true",
                       help="show only warnings, errors and the answer")
    parser.add_argument("--version", action="version", version=_version())


def check_common_args(args: argparse.Namespace) -> str | None:
    """An error message for option values argparse cannot check, else None."""
    if args.max_steps is not None and args.max_steps < 1:
        return "--max-steps must be at least 1"
    return None


def _version() -> str:
    from app import __version__

    return f"OpenManus-py {__version__}"


class TerminalSession(ABC):
    """One process: set-up, then tasks from ``--prompt`` or stdin, with Ctrl-C handling.

    Subclasses build what runs the tasks (``build``), start one task (``start_task``),
    turn its result into output and an exit code (``report``) and release resources
    (``cleanup``).
    """

    log_name = "openmanus"
    exit_words: frozenset[str] = EXIT_WORDS
    banner = "OpenManus ready. Type a task and press Enter; 'exit' or Ctrl-D to leave."

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.task: asyncio.Task[Any] | None = None
        self.main_task: asyncio.Task[Any] | None = None
        self.quitting = False
        self.reader: Any = None

    @abstractmethod
    async def build(self) -> None:
        """Create the agents (or flow); ``ConfigError`` means exit code 2."""

    @abstractmethod
    def start_task(self, prompt: str) -> Awaitable[Any]:
        """The awaitable that runs one task."""

    @abstractmethod
    def report(self, result: Any) -> int:
        """Print the task's answer and return its exit code."""

    @abstractmethod
    async def cleanup(self) -> None:
        """Release agents and tools at exit."""

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
        from app.exceptions import ConfigError, MCPServerError

        self.main_task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signal.SIGINT, self._on_sigint)
            loop.add_signal_handler(signal.SIGTERM, self._quit)
        try:
            try:
                self._setup()
                await self.build()
            except ConfigError as e:
                say(f"error: {e}")
                return EXIT_CONFIG
            except MCPServerError as e:  # run_mcp.py: the server cannot be reached
                say(f"error: {e}")
                return EXIT_FAILED
            if self.args.prompt is not None:
                return await self._one_shot(self.args.prompt)
            return await self._interactive()
        except asyncio.CancelledError:
            return EXIT_INTERRUPTED
        finally:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(self.cleanup(), timeout=10)
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(signal.SIGINT)
                loop.remove_signal_handler(signal.SIGTERM)

    def _setup(self) -> None:
        from app.config import config
        from app.logger import define_log_level
        from app.tool.ask_human import StdinInputProvider, set_input_provider

        level = "DEBUG" if self.args.verbose else "WARNING" if self.args.quiet else "INFO"
        log_dir = os.environ.get("OPENMANUS_LOG_DIR") or None
        define_log_level(print_level=level, name=self.log_name, compact=True,
                         log_dir=Path(log_dir) if log_dir else None)
        config.load(self.args.config)
        config.llm  # noqa: B018 - validate the LLM section now, with one clear message
        self.reader = StdinInputProvider()
        set_input_provider(self.reader)

    async def _run_task(self, prompt: str) -> int:
        """Run one task; returns its exit code. Ctrl-C cancels only this task."""
        self.task = asyncio.ensure_future(self.start_task(prompt))
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
        return self.report(result)

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
        return EXIT_INTERRUPTED if self.quitting else EXIT_OK


def say(message: str) -> None:
    """A line for the user on stderr (stdout is kept for answers)."""
    print(message, file=sys.stderr, flush=True)


def stdin_is_tty() -> bool:
    try:
        return os.isatty(sys.stdin.fileno())
    except (AttributeError, OSError, ValueError):
        return False
