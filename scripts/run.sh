#!/usr/bin/env bash
# Set up OpenManus on a fresh machine and run main.py: a virtualenv with the package and the
# extras Manus uses (browser_use, web search, charts, the Docker sandbox), and a Chromium for
# the browser (Debian's package when none is found). Idempotent; the venv is shared with
# scripts/test.sh without reinstalling. Arguments go to main.py, e.g.
# `bash scripts/run.sh -p "list the files here"`.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/setup-venv.sh
source scripts/setup-venv.sh browser,search,data,docker,web
# shellcheck source=scripts/setup-chromium.sh
CHROMIUM_OPTIONAL=1 source scripts/setup-chromium.sh
exec "$VENV/bin/python" main.py "$@"
