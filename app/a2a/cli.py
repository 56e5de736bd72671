"""``python -m protocol.a2a.app.main``: start Manus as an A2A agent (docs/a2a.md).

Loopback (``localhost``) unless ``--allow-remote``, which needs a token (``OPENMANUS_A2A_TOKEN``).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from app.a2a import EXIT_CONFIG, TOKEN_ENV, say
from app.web.security import is_loopback


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m protocol.a2a.app.main",
        description="Start Manus as an A2A (Agent2Agent) agent.",
    )
    parser.add_argument(
        "--host", default="localhost", help="address to listen on (default: localhost)"
    )
    parser.add_argument(
        "--port", type=int, default=10000, help="port (default: 10000; 0: any free port)"
    )
    parser.add_argument(
        "-c",
        "--config",
        type=Path,
        help="config file (default: $OPENMANUS_CONFIG, else config/config.toml)",
    )
    parser.add_argument(
        "-w", "--workspace", type=Path, help="workspace (conversations go to <workspace>/a2a/)"
    )
    parser.add_argument("--max-steps", type=int, help="step budget per task")
    parser.add_argument(
        "--idle-timeout",
        type=float,
        default=3600.0,
        help="close a conversation unused this many seconds; its next message reopens it from "
        "its session file (default: 3600)",
    )
    parser.add_argument(
        "--allow-remote",
        action="store_true",
        help=f"allow a non-loopback --host (then {TOKEN_ENV} must be set)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # Read once and removed, so the agents' own processes do not inherit it.
    token = os.environ.pop(TOKEN_ENV, "") or None
    if not is_loopback(args.host) and not (args.allow_remote and token):
        say(
            f"error: {args.host} is not a loopback address; other machines could drive your "
            f"agent. Pass --allow-remote and set {TOKEN_ENV} to do it anyway."
        )
        return EXIT_CONFIG
    if args.max_steps is not None and args.max_steps < 1:
        say("error: --max-steps must be at least 1")
        return EXIT_CONFIG
    if not args.idle_timeout > 0:
        say("error: --idle-timeout must be more than 0 seconds")
        return EXIT_CONFIG
    if not 0 <= args.port <= 65535:
        say("error: --port must be between 0 and 65535")
        return EXIT_CONFIG
    try:
        # The a2a extra and the agent load once the options are checked: ``--help`` takes
        # 0.09 s of CPU instead of 1.3 s (measured).
        from app.a2a.server import serve
    except ModuleNotFoundError as e:
        if e.name is None or e.name.split(".")[0] not in ("a2a", "starlette", "uvicorn"):
            raise
        from app.install_hint import pip_install  # loads the config package: only when needed

        say(f"error: the A2A server needs its extra: {pip_install('a2a')}")
        return EXIT_CONFIG
    return serve(args, token)
