#!/usr/bin/env bash
# Installs Arize Phoenix (a real trace backend) into its own venv .venv-phoenix (gitignored),
# pinned, for the tracing tests (tests/test_tracing.py starts it on 127.0.0.1). Its many
# dependencies (it also pins mcp, google-genai...) live there so they never move the pins of
# the project's .venv. Idempotent: a stamp makes later calls return at once. Offline-tolerant:
# if pip cannot install it, it says so and exits 0; the tests that need it then fail with a
# message naming this script (they never skip).
#   OPENMANUS_PHOENIX_VENV  where the venv goes (default: <repo>/.venv-phoenix)
set -u
cd "$(dirname "$0")/.."
PHOENIX_VERSION=20.26.1
PVENV="${OPENMANUS_PHOENIX_VENV:-$PWD/.venv-phoenix}"
STAMP="$PVENV/.ready-arize-phoenix-$PHOENIX_VERSION"

if [ -f "$STAMP" ] && [ -x "$PVENV/bin/phoenix" ]; then
  exit 0
fi
# A Python that runs (a pyenv shim for a version that is not selected exists but fails).
PY=python3
for cand in "${PYTHON:-}" python3.13 python3.12 python3.11 python3; do
  [ -n "$cand" ] || continue
  if command -v "$cand" >/dev/null 2>&1 &&
     "$cand" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
    PY="$cand"
    break
  fi
done
if { [ -x "$PVENV/bin/python" ] || "$PY" -m venv "$PVENV"; } &&
   "$PVENV/bin/python" -m pip install -q --disable-pip-version-check \
     "arize-phoenix==$PHOENIX_VERSION" > "$PVENV.install.log" 2>&1; then
  touch "$STAMP"
else
  echo "setup-phoenix: could not install arize-phoenix (see $PVENV.install.log);" \
    "the Phoenix tracing test will fail" >&2
fi
exit 0
