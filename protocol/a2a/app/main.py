"""Upstream compatibility: upstream's A2A entry point, ``python -m protocol.a2a.app.main
[--host localhost] [--port 10000]``; the program is :func:`app.a2a.cli.main` (docs/a2a.md)."""

import sys

from app.a2a.cli import main

if __name__ == "__main__":
    sys.exit(main())
