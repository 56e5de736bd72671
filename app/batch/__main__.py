"""``python -m app.batch``: see :mod:`app.batch.cli`."""

from __future__ import annotations

import sys

from app.batch.cli import main

__all__: list[str] = []

if __name__ == "__main__":
    sys.exit(main())
