"""Run the MCP agent: `python run_mcp.py -p "task"`, `-i` for a session, `--connection http`."""

import sys

from app.cli.mcp import main

if __name__ == "__main__":
    sys.exit(main())
