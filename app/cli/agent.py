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

from app.cli.common import (
    EXIT_CONFIG,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    say,
)
from app.cli.options import add_common_options, add_prompt_option, check_common_args

__all__ = [
    "EXIT_CONFIG",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
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
    # The framework loads once the options are known: ``main.py --help`` stays under 0.15 s
    # (importing it costs about 0.3 s).
    from app.cli.session import AgentSession

    try:
        return asyncio.run(AgentSession(args).run())
    except KeyboardInterrupt:  # Ctrl-C before the handlers were installed
        return EXIT_INTERRUPTED
