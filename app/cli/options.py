"""The options the terminal programs share, declared once so their help and checks agree."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from app import __version__
from app.cli.common import EXIT_CONFIG, EXIT_INTERRUPTED, say

WORKSPACE_HELP = "directory the agents work in"


def add_prompt_option(parser: argparse.ArgumentParser) -> None:
    """``-p/--prompt``: one task, then exit."""
    parser.add_argument("-p", "--prompt", help="run this one task and exit")


def add_common_options(
    parser: argparse.ArgumentParser,
    *,
    max_steps_help: str,
    workspace_help: str = WORKSPACE_HELP,
) -> None:
    """``-c/--config``, ``--max-steps``, ``--workspace``, ``--verbose/--quiet``, ``--version``,
    ``--trace`` and the session options, in that order: one meaning per letter in every
    program."""
    parser.add_argument(
        "-c",
        "--config",
        type=Path,
        help="config file (default: $OPENMANUS_CONFIG, else config/config.toml)",
    )
    parser.add_argument("--max-steps", type=int, help=max_steps_help)
    parser.add_argument("-w", "--workspace", type=Path, help=workspace_help)
    level = parser.add_mutually_exclusive_group()
    level.add_argument("-v", "--verbose", action="store_true", help="show debug output")
    level.add_argument(
        "-q", "--quiet", action="store_true", help="show only warnings, errors and the answer"
    )
    parser.add_argument("--version", action="version", version=version_text())
    parser.add_argument(
        "--trace",
        action="store_true",
        help="send OpenTelemetry traces of the runs ([tracing] in the config; docs/tracing.md)",
    )
    add_session_options(parser)


def add_session_options(parser: argparse.ArgumentParser) -> None:
    """``--resume``, ``--list-sessions``, ``--no-session``, ``--record``, ``--replay``."""
    group = parser.add_argument_group("sessions, recording and replay")
    group.add_argument(
        "--resume",
        metavar="ID",
        help="restore session ID (memory, steps, plan, usage) and carry on",
    )
    group.add_argument(
        "--list-sessions",
        action="store_true",
        help="list recent sessions of the workspace and exit",
    )
    group.add_argument(
        "--no-session",
        action="store_true",
        help="do not write a session file (<workspace>/.sessions/<id>.jsonl)",
    )
    record_help = "save every LLM request and response of this run to FILE"
    replay_help = "answer from FILE (made with --record) instead of the model; tools really run"
    group.add_argument("--record", metavar="FILE", type=Path, help=record_help)
    group.add_argument("--replay", metavar="FILE", type=Path, help=replay_help)
    group.add_argument(
        "--strict-replay",
        action="store_true",
        help="with --replay: stop at the first request that departs from the "
        "recording (default: warn and go on)",
    )


def check_common_args(args: argparse.Namespace) -> str | None:
    """An error message for option values argparse cannot check, else None."""
    if args.max_steps is not None and args.max_steps < 1:
        return "--max-steps must be at least 1"
    if getattr(args, "record", None) and getattr(args, "replay", None):
        return "--record and --replay cannot be used together"
    if getattr(args, "strict_replay", False) and not getattr(args, "replay", None):
        return "--strict-replay needs --replay FILE"
    if getattr(args, "resume", None) and getattr(args, "no_session", False):
        return "--resume continues a session file; it cannot be used with --no-session"
    return None


def version_text() -> str:
    """What ``--version`` prints."""
    return f"OpenManus-py {__version__}"


def run_program(session: str, args: argparse.Namespace, problem: str | None) -> int:
    """Refuse bad options (``problem``), else run ``app.cli.session``'s class ``session``."""
    if problem:
        say(f"error: {problem}")
        return EXIT_CONFIG
    # Measured: the framework costs about 0.3 s; loaded once the options are known, so
    # ``main.py --help`` stays under 0.15 s.
    from app.cli import session as sessions

    try:
        return int(asyncio.run(getattr(sessions, session)(args).run()))
    except KeyboardInterrupt:  # Ctrl-C before the handlers were installed
        return EXIT_INTERRUPTED
