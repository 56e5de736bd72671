#!/usr/bin/env bash
# Sourced by run.sh and test.sh: create .venv with Python >= 3.11 and install the package
# with (at least) the extras named in $1 (e.g. "browser,search"). Extras already installed are
# kept, so run.sh and test.sh can alternate without reinstalling; a reinstall happens only
# when pyproject.toml changes or an extra is asked for that is not installed yet. Sets VENV.
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
if [ ! -x "$VENV/bin/python" ]; then
  "$(pick_python)" -m venv "$VENV"
fi
# The stamp is named after pyproject.toml and lists the extras installed with it.
stamp="$VENV/.installed-$(sha1sum pyproject.toml | cut -c1-16)"
installed=""
[ -f "$stamp" ] && installed="$(cat "$stamp")"
wanted="$(printf '%s\n' $(echo "$installed,${1:-}" | tr ',' ' ') | sort -u | paste -sd, -)"
if [ ! -f "$stamp" ] || [ "$wanted" != "$installed" ]; then
  target="."
  [ -n "$wanted" ] && target=".[$wanted]"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -e "$target"
  rm -f "$VENV"/.installed-*
  printf '%s' "$wanted" > "$stamp"
fi
