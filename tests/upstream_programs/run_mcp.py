"""An upstream-style run_mcp.py: MCPAgent over stdio to ``python -m <server_reference>``."""

import argparse
import asyncio
import sys

from app.agent.mcp import MCPAgent
from app.config import config
from app.logger import logger


class MCPRunner:
    def __init__(self):
        self.root_path = config.root_path
        self.server_reference = config.mcp_config.server_reference
        self.agent = MCPAgent()

    async def initialize(self, connection_type, server_url=None):
        logger.info(f"Initializing MCPAgent with {connection_type} connection...")
        if connection_type == "stdio":
            await self.agent.initialize(
                connection_type="stdio",
                command=sys.executable,
                args=["-m", self.server_reference],
            )
        else:
            await self.agent.initialize(connection_type="sse", server_url=server_url)
        logger.info(f"Connected to MCP server via {connection_type}")

    async def run_single_prompt(self, prompt):
        print("AGENT RESULT:", await self.agent.run(prompt))

    async def cleanup(self):
        await self.agent.cleanup()
        logger.info("Session ended")


def parse_args():
    parser = argparse.ArgumentParser(description="Run the MCP Agent")
    parser.add_argument("--connection", "-c", choices=["stdio", "sse"], default="stdio")
    parser.add_argument("--server-url", default="http://127.0.0.1:8000/sse")
    parser.add_argument("--prompt", "-p")
    return parser.parse_args()


async def run_mcp():
    args = parse_args()
    runner = MCPRunner()
    try:
        await runner.initialize(args.connection, args.server_url)
        await runner.run_single_prompt(args.prompt)
    except Exception as e:
        logger.error(f"Error running MCPAgent: {e}", exc_info=True)
        sys.exit(1)
    finally:
        await runner.cleanup()


if __name__ == "__main__":
    asyncio.run(run_mcp())
