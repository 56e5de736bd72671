"""``python -m protocol.a2a.app.main``: start Manus as an A2A agent (docs/a2a.md).

Loopback (``localhost``) unless ``--allow-remote``, which needs a token (``OPENMANUS_A2A_TOKEN``
or ``--tokens-file``). The options that need the ``a2a`` extra to check are checked by
:func:`app.a2a.server.serve`.
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
        help=f"allow a non-loopback --host (then {TOKEN_ENV} or --tokens-file must be set)",
    )
    parser.add_argument(
        "--tokens-file",
        type=Path,
        metavar="PATH",
        help="callers, one '<name> <token>' a line: each sees only its own tasks, "
        "conversations, webhooks and workspaces",
    )
    parser.add_argument(
        "--max-body",
        type=float,
        default=4.0,
        metavar="MIB",
        help="largest request body, in MiB; larger ones get 413 (default: 4)",
    )
    parser.add_argument(
        "--max-tasks",
        type=int,
        default=1000,
        help="finished tasks beyond this many are forgotten, oldest first (default: 1000)",
    )
    parser.add_argument(
        "--task-memory",
        type=float,
        default=256.0,
        metavar="MIB",
        help="finished tasks beyond this much memory are forgotten, oldest first (default: 256)",
    )
    parser.add_argument(
        "--task-ttl",
        type=float,
        default=86400.0,
        metavar="SECONDS",
        help="a finished task is forgotten this long after its last update (default: 86400)",
    )
    parser.add_argument(
        "--allow-push-target",
        action="append",
        default=[],
        metavar="ADDRESS[/PREFIX][:PORT]",
        help="let webhooks reach this non-public network (or address, or address and port); "
        "repeatable (default: public addresses only)",
    )
    parser.add_argument(
        "--push-resolve",
        action="append",
        default=[],
        metavar="HOST=ADDRESS",
        help="resolve this webhook host name to this address, without DNS; repeatable",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # Read once and removed, so the agents' own processes do not inherit it.
    token = os.environ.pop(TOKEN_ENV, "") or None
    if not is_loopback(args.host) and not (args.allow_remote and (token or args.tokens_file)):
        say(
            f"error: {args.host} is not a loopback address; other machines could drive your "
            f"agent. Pass --allow-remote and set {TOKEN_ENV} (or --tokens-file) to do it anyway."
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
