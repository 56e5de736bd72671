"""``run_mcp.py``: the MCP agent in the terminal, connected to an MCP server: our own over
stdio by default, or a running one (``--connection sse|http`` with ``--server-url``).
"""

from __future__ import annotations

import argparse

from app.cli.common import DEFAULT_URLS
from app.cli.options import add_common_options, add_prompt_option, check_common_args, run_program

_CONNECTIONS = {"stdio": "stdio", "sse": "sse", "http": "http", "streamable-http": "http"}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="run_mcp.py",
        description="Run the MCP agent against an MCP server (by default our own, started "
        "over stdio). Without --prompt or --interactive, reads one task from stdin.",
    )
    parser.add_argument(
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
        workspace_help="directory the started server's tools work in (stdio only)",
    )
    return parser


def connection_as_config(args: argparse.Namespace) -> str | None:
    """Upstream's ``run_mcp.py`` spelled ``--connection`` ``-c``; here ``-c`` is ``--config``
    as in every program, so ``-c sse`` (no such file) gets a pointer, not a missing config."""
    value = args.config
    if value is None or str(value) not in _CONNECTIONS or value.exists():
        return None
    return (
        f"-c is --config (a config file) in run_mcp.py, as in main.py and run_flow.py; "
        f"for the connection type use --connection {value}"
    )


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.connection = _CONNECTIONS[args.connection]
    problem = connection_as_config(args) or check_common_args(args)
    if problem is None and args.connection == "stdio" and args.server_url:
        problem = "--server-url needs --connection sse or http"
    return run_program("MCPSession", args, problem)
