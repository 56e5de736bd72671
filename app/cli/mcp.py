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

from app.cli.agent import AgentSession
from app.cli.common import EXIT_CONFIG, EXIT_INTERRUPTED, EXIT_OK, EXIT_WORDS
from app.cli.options import add_common_options, add_prompt_option, check_common_args

__all__ = ["DEFAULT_URLS", "MCPSession", "build_parser", "main"]

DEFAULT_URLS = {"sse": "http://127.0.0.1:8000/sse", "http": "http://127.0.0.1:8000/mcp"}
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
    try:
        return asyncio.run(MCPSession(args).run())
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


class MCPSession(AgentSession):
    """``main.py``'s session with an ``MCPAgent`` instead of Manus."""

    exit_words = EXIT_WORDS | {"q"}

    async def build(self) -> None:
        from app.agent.mcp import MCPAgent
        from app.config import config
        from app.logger import logger

        # The workspace goes to the MCP server (below), not to the agent.
        agent = MCPAgent(**self.agent_options(workspace=False))
        self.agent = agent  # cleaned up by the session even if connecting fails half-way
        if self.args.connection == "stdio":
            server_args = ["-m", config.mcp_config.server_reference]
            if config.config_path is not None:
                server_args += ["--config", str(config.config_path)]
            if self.args.workspace is not None:
                server_args += ["--workspace", str(self.args.workspace.resolve())]
            await agent.initialize(
                "stdio", command=sys.executable, args=server_args, inherit_env=True
            )
        else:
            url = self.args.server_url or DEFAULT_URLS[self.args.connection]
            await agent.initialize(self.args.connection, server_url=url)
        logger.info(
            f"{agent.name} ready (model {agent.llm.model}; "
            f"{len(agent.available_tools)} tools over {self.args.connection})"
        )

    async def _interactive(self) -> int:
        if self.args.interactive:
            return await super()._interactive()
        # Upstream's default mode: read one task, run it, leave.
        line = await self.reader.read_line("Enter your request: " if sys.stdin.isatty() else "")
        if line is None or not line.strip():
            return EXIT_OK
        return await self._run_task(line.strip())
