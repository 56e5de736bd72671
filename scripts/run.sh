#!/usr/bin/env bash
# Set up OpenManus on a fresh machine (a virtualenv with the package) and run main.py.
# Idempotent; arguments go to main.py, e.g. `bash scripts/run.sh -p "list the files here"`.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/setup-venv.sh
source scripts/setup-venv.sh ""
exec "$VENV/bin/python" main.py "$@"
