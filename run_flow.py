"""Run a task as a planning flow: `python run_flow.py -p "task"` (or interactive input)."""

import sys

from app.cli.flow import main

if __name__ == "__main__":
    sys.exit(main())
