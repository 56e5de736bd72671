"""Run OpenManus in the terminal: `python main.py` (interactive) or `python main.py -p "task"`."""

import sys

from app.cli import main

if __name__ == "__main__":
    sys.exit(main())
