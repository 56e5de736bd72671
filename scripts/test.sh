#!/usr/bin/env bash
# Set up everything the test suite needs on a fresh machine, then run it.
# Idempotent: a second run reuses .venv and reinstalls only when pyproject.toml changes.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -k llm -x`.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/setup-venv.sh
source scripts/setup-venv.sh dev

"$VENV/bin/python" -m ruff check app bench tests main.py
exec "$VENV/bin/python" -m pytest "$@"
