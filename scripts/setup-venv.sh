#!/usr/bin/env bash
# Sourced by run.sh and test.sh: create .venv with Python >= 3.11 and install the package
# with the extras named in $1 (e.g. "dev"). Reinstalls only when pyproject.toml or the extras
# change. Sets VENV.
pick_python() {
  for cand in "${PYTHON:-}" python3.13 python3.12 python3.11 python3; do
    [ -n "$cand" ] || continue
    if command -v "$cand" >/dev/null 2>&1 &&
       "$cand" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
      echo "$cand"; return 0
    fi
  done
  echo "error: Python 3.11 or newer is required (set PYTHON=/path/to/python3.11)" >&2
  return 1
}

VENV=.venv
extras="${1:-}"
if [ ! -x "$VENV/bin/python" ]; then
  "$(pick_python)" -m venv "$VENV"
fi
stamp="$VENV/.installed-$( (cat pyproject.toml; echo "$extras") | sha1sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  target="."
  [ -n "$extras" ] && target=".[$extras]"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -e "$target"
  rm -f "$VENV"/.installed-*
  touch "$stamp"
fi
