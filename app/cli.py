"""``main.py``: the interactive terminal program around Manus.

Progress (steps, thoughts, tool calls, results, token usage) goes to stderr through the
logger; only final answers go to stdout, so ``python main.py -p ... > answer.txt`` works.
Ctrl-C stops the running task and returns to the prompt; a second Ctrl-C quits.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.agent.base import BaseAgent
    from app.agent.result import RunResult

__all__ = ["EXIT_CONFIG", "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "build_parser", "main"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_CONFIG = 2
EXIT_INTERRUPTED = 130
EXIT_WORDS = frozenset({"exit", "quit"})


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="main.py",
        description="OpenManus: a general-purpose agent that runs code, edits files and more. "
        "Without --prompt, opens an interactive prompt (one task per line; 'exit' to leave).",
    )
    parser.add_argument("-p", "--prompt", help="run this one task and exit")
    parser.add_argument(
        "-c", "--config", type=Path,
        help="config file (default: $OPENMANUS_CONFIG, else config/config.toml)",
    )
    parser.add_argument("--max-steps", type=int, help="step budget per task (default: 20)")
    parser.add_argument("-w", "--workspace", type=Path, help="directory the agent works in")
    level = parser.add_mutually_exclusive_group()
    level.add_argument("-v", "--verbose", action="store_true", help="show debug output")
    level.add_argument("-q", "--quiet", action="store_true",
                       help="show only warnings, errors and the answer")
    parser.add_argument("--version", action="version", version=_version())
    return parser


def _version() -> str:
    from app import __version__

    return f"OpenManus-py {__version__}"


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.max_steps is not None and args.max_steps < 1:
        print("error: --max-steps must be at least 1", file=sys.stderr)
        return EXIT_CONFIG
    try:
        return asyncio.run(_Session(args).run())
    except KeyboardInterrupt:  # Ctrl-C before the handlers were installed
        return EXIT_INTERRUPTED


class _Session:
    """One process: builds the agent, reads tasks, runs them, handles Ctrl-C."""

    exit_words: frozenset[str] = EXIT_WORDS

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.agent: BaseAgent | None = None
        self.task: asyncio.Task[Any] | None = None
        self.main_task: asyncio.Task[Any] | None = None
        self.quitting = False
        self.reader: Any = None

    # ---- signals -------------------------------------------------------------------------------

    def _on_sigint(self) -> None:
        if self.task is not None and not self.task.done() and not self.quitting:
            if self.task.cancelling():
                self._quit()  # second Ctrl-C while the task is still stopping
                return
            _say("\n⏹  Stopping the task... (press Ctrl-C again to quit)")
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
                self.agent = await self._build_agent()
            except ConfigError as e:
                _say(f"error: {e}")
                return EXIT_CONFIG
            except MCPServerError as e:  # run_mcp.py: the server cannot be reached
                _say(f"error: {e}")
                return EXIT_FAILED
            if self.args.prompt is not None:
                return await self._one_shot(self.args.prompt)
            return await self._interactive()
        except asyncio.CancelledError:
            return EXIT_INTERRUPTED
        finally:
            if self.agent is not None:
                with contextlib.suppress(Exception, asyncio.CancelledError):
                    await asyncio.wait_for(self.agent.cleanup(), timeout=10)
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(signal.SIGINT)
                loop.remove_signal_handler(signal.SIGTERM)

    def _setup(self) -> None:
        from app.config import config
        from app.logger import define_log_level
        from app.tool.ask_human import StdinInputProvider, set_input_provider

        level = "DEBUG" if self.args.verbose else "WARNING" if self.args.quiet else "INFO"
        define_log_level(print_level=level, name="openmanus", compact=True)
        config.load(self.args.config)
        config.llm  # noqa: B018 - validate the LLM section now, with one clear message
        self.reader = StdinInputProvider()
        set_input_provider(self.reader)

    async def _build_agent(self) -> BaseAgent:
        from app.agent.manus import Manus

        kwargs: dict[str, Any] = {}
        if self.args.max_steps is not None:
            kwargs["max_steps"] = self.args.max_steps
        if self.args.workspace is not None:
            kwargs["workspace"] = self.args.workspace
        from app.logger import logger

        agent = await Manus.create(**kwargs)
        tools = ", ".join(agent.available_tools.tool_map)
        logger.info(f"{agent.name} ready (model {agent.llm.model}; tools: {tools})")
        return agent

    async def _run_task(self, prompt: str) -> int:
        """Run one task; returns its exit code. Ctrl-C cancels only this task."""
        from app.logger import logger

        assert self.agent is not None
        self.task = asyncio.ensure_future(self.agent.run(prompt))
        try:
            result: RunResult = await self.task
        except asyncio.CancelledError:
            if self.quitting:
                raise
            # Ctrl-C cancelled only the task; the session itself goes on.
            _say("Task interrupted.")
            return EXIT_INTERRUPTED
        finally:
            self.task = None
        answer = result.final_answer or (result.step_results[-1] if result.step_results else "")
        if answer:
            print(answer, flush=True)
        _say(f"Tokens: {result.usage}")
        if result.error is not None:
            _say(f"error: {result.error}")
            return EXIT_FAILED
        if not result.ok:
            logger.warning(f"Stopped after {result.steps} steps without finishing the task")
            return EXIT_FAILED
        return EXIT_OK

    async def _one_shot(self, prompt: str) -> int:
        if not prompt.strip():
            _say("error: the prompt is empty")
            return EXIT_CONFIG
        return await self._run_task(prompt)

    async def _interactive(self) -> int:
        interactive = _stdin_is_tty()
        if interactive:
            _say("OpenManus ready. Type a task and press Enter; 'exit' or Ctrl-D to leave.")
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
            _say("Goodbye.")
        return EXIT_INTERRUPTED if self.quitting else EXIT_OK


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _stdin_is_tty() -> bool:
    try:
        return os.isatty(sys.stdin.fileno())
    except (AttributeError, OSError, ValueError):
        return False
