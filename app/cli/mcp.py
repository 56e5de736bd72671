"""``run_mcp.py``: the MCP agent in the terminal, connected to an MCP server.

By default it starts our own server (``python -m app.mcp.server``) over stdio; ``-c sse`` or
``-c http`` with ``--server-url`` reach a running one. Signal handling, logging, exit codes
and the prompt loop are ``main.py``'s (:mod:`app.cli.agent`); one connection serves every task
of an interactive session.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from app.cli.common import DEFAULT_URLS, EXIT_CONFIG, EXIT_INTERRUPTED
from app.cli.options import add_common_options, add_prompt_option, check_common_args

__all__ = ["build_parser", "main"]

_CONNECTIONS = {"stdio": "stdio", "sse": "sse", "http": "http", "streamable-http": "http"}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="run_mcp.py",
        description="Run the MCP agent against an MCP server (by default our own, started "
        "over stdio). Without --prompt or --interactive, reads one task from stdin.",
    )
    parser.add_argument(
        "-c",
        "--connection",
        default="stdio",
        choices=sorted(_CONNECTIONS),
        help="stdio (start our server; default), sse or http (connect to --server-url)",
    )
    parser.add_argument(
        "--server-url",
        help=f"server URL for sse/http (default {DEFAULT_URLS['sse']} or {DEFAULT_URLS['http']})",
    )
    parser.add_argument(
        "-i",
        "--interactive",
        action="store_true",
        help="one task per line until 'exit', 'quit', 'q' or end of input",
    )
    add_prompt_option(parser)
    add_common_options(
        parser,
        max_steps_help="step budget per task (default: 20)",
        short_config=False,  # -c is --connection, as upstream's run_mcp.py has it
        workspace_help="directory the started server's tools work in (stdio only)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.connection = _CONNECTIONS[args.connection]
    problem = check_common_args(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return EXIT_CONFIG
    if args.connection == "stdio" and args.server_url:
        print("error: --server-url needs --connection sse or http", file=sys.stderr)
        return EXIT_CONFIG
    from app.cli.session import MCPSession  # the framework, once the options are known

    try:
        return asyncio.run(MCPSession(args).run())
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
