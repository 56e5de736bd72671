#!/usr/bin/env bash
# Set up the virtualenv if needed (idempotent), then run the performance suite and print its
# table. Arguments go to `python -m bench`, e.g. `bash scripts/bench.sh --quick`.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/setup-venv.sh
source scripts/setup-venv.sh ""
exec "$VENV/bin/python" -m bench "$@"
