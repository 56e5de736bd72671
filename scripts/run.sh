#!/usr/bin/env bash
# Set up OpenManus on a fresh machine and run main.py: a virtualenv with the package and the
# extras the README's programs use (browser_use, web search, charts, the Docker sandbox, the
# web UI, the A2A agent), and a Chromium for the browser (Debian's package when none is
# found). Idempotent; the venv is shared with scripts/test.sh without reinstalling. Arguments
# go to main.py, e.g. `bash scripts/run.sh -p "list the files here"`.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/setup-venv.sh
source scripts/setup-venv.sh browser,search,data,docker,web,a2a
# shellcheck source=scripts/setup-chromium.sh
CHROMIUM_OPTIONAL=1 source scripts/setup-chromium.sh
# slirp4netns: the bubblewrap sandbox's network_enabled needs it (docs/sandbox.md); optional.
command -v slirp4netns >/dev/null 2>&1 || { [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1 &&
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=600 slirp4netns \
    >/dev/null 2>&1; } || echo "warning: no slirp4netns: bubblewrap refuses network_enabled" >&2
exec "$VENV/bin/python" main.py "$@"
