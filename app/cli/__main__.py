"""``python -m app.cli``: the same program as ``python main.py``."""

import sys

from app.cli.agent import main

if __name__ == "__main__":
    sys.exit(main())
