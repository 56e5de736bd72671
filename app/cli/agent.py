"""``main.py``: the interactive terminal program around Manus.

Progress (steps, thoughts, tool calls, results, token usage) goes to stderr through the
logger; only final answers go to stdout, so ``python main.py -p ... > answer.txt`` works. A run
that does not complete prints nothing on stdout; its reason goes to stderr and the exit code
is 1.
Ctrl-C stops the running task and returns to the prompt (the session reads ``interrupted``;
``--resume`` carries the task on); a second Ctrl-C quits. The session
loop and exit codes (:mod:`app.cli.common`) and the options (:mod:`app.cli.options`) are
shared with ``run_flow.py`` and ``run_mcp.py``.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from app.cli.common import (
    EXIT_CONFIG,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    TerminalSession,
    answer,
    exit_code_for,
    say,
)
from app.cli.options import add_common_options, add_prompt_option, check_common_args

if TYPE_CHECKING:
    from app.agent.base import BaseAgent
    from app.agent.result import RunResult
    from app.events import EventBus
    from app.session import SessionData, SessionRecorder

__all__ = [
    "EXIT_CONFIG",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "AgentSession",
    "build_parser",
    "main",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="main.py",
        description="OpenManus: a general-purpose agent that runs code, edits files and more. "
        "Without --prompt, opens an interactive prompt (one task per line; 'exit' to leave).",
    )
    add_prompt_option(parser)
    add_common_options(parser, max_steps_help="step budget per task (default: 20)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    problem = check_common_args(args)
    if problem:
        say(f"error: {problem}")
        return EXIT_CONFIG
    try:
        return asyncio.run(AgentSession(args).run())
    except KeyboardInterrupt:  # Ctrl-C before the handlers were installed
        return EXIT_INTERRUPTED


class AgentSession(TerminalSession):
    """Manus answering one task after another, in one conversation (``run_mcp.py`` builds
    an ``MCPAgent`` instead)."""

    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(args)
        self.agent: BaseAgent | None = None

    async def build(self) -> None:
        from app.agent.manus import Manus
        from app.logger import logger

        agent = await Manus.create(**self.agent_options())
        tools = ", ".join(agent.available_tools.tool_map)
        logger.info(f"{agent.name} ready (model {agent.llm.model}; tools: {tools})")
        self.agent = agent

    def start_task(self, prompt: str) -> Awaitable[Any]:
        assert self.agent is not None
        return self.agent.run(prompt)

    def event_bus(self) -> EventBus | None:
        return self.agent.events if self.agent is not None else None

    def session_header(self) -> dict[str, Any]:
        assert self.agent is not None
        return {"agents": {self.agent.name: self.agent.name}, "model": self.agent.llm.model}

    def attach_session(self, recorder: SessionRecorder, *, already_written: bool) -> None:
        assert self.agent is not None
        recorder.attach_agent(self.agent, already_written=already_written)

    def restore_session(self, data: SessionData) -> None:
        assert self.agent is not None
        data.restore_agent(self.agent, self.agent.name if self.agent.name in data.agents else None)

    def continue_task(self) -> Awaitable[Any]:
        assert self.agent is not None
        return self.agent.resume()

    def report(self, result: RunResult) -> int:
        """stdout gets the final answer of a completed run and nothing else (no step log);
        stderr gets the usage and, for a run that did not complete, why it stopped."""
        if result.ok and result.final_answer:
            answer(result.final_answer)
        elif result.ok:
            say("(the task finished without a written answer)")
        say(f"Tokens: {result.usage}")
        if not result.ok:
            say(f"error: {result.failure} (stop reason: {result.stop_reason})")
        return exit_code_for(result.stop_reason)

    async def cleanup(self) -> None:
        if self.agent is not None:
            await self.agent.cleanup()
