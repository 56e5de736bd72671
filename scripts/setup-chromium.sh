#!/usr/bin/env bash
# Sourced by test.sh and run.sh: make sure a Chromium is installed for browser_use (Debian's
# `chromium` package when none is found). apt-get update runs only when the package is not
# known yet. Needs root (or sudo) the first time; idempotent afterwards. With
# CHROMIUM_OPTIONAL=1 (run.sh) a failure is a warning: the agent still runs, without a browser.
have_chromium() {
  for cand in chromium chromium-browser google-chrome google-chrome-stable; do
    command -v "$cand" >/dev/null 2>&1 && return 0
  done
  return 1
}
chromium_failed() {
  if [ -n "${CHROMIUM_OPTIONAL:-}" ]; then
    echo "warning: $1; browser_use will fail until a Chromium is installed" \
         "(as root: bash scripts/setup-chromium.sh, or apt-get install chromium)" >&2
    return 0
  fi
  echo "error: $1" >&2
  exit 1
}
setup_chromium() {
  have_chromium && return 0
  command -v apt-get >/dev/null 2>&1 ||
    { chromium_failed "no Chromium found and no apt-get to install it; install chromium"; return 0; }
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo -n"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-cache show chromium >/dev/null 2>&1; then
    $sudo apt-get update -qq -o DPkg::Lock::Timeout=600 ||
      { chromium_failed "apt-get update failed"; return 0; }
  fi
  $sudo apt-get install -y -qq -o DPkg::Lock::Timeout=600 chromium >/dev/null ||
    { chromium_failed "installing chromium failed"; return 0; }
  have_chromium || chromium_failed "installing chromium failed"
}
setup_chromium
# An agent running as root starts Chromium as this unprivileged system user, with Chromium's own
# sandbox (app/tool/browser/launcher.py; without the user it falls back to nobody).
if [ "$(id -u)" -eq 0 ] && ! id openmanus-browser >/dev/null 2>&1 && command -v useradd >/dev/null 2>&1; then
  useradd --system --user-group --no-create-home --home-dir /nonexistent \
    --shell /usr/sbin/nologin openmanus-browser ||
    echo "warning: could not create the openmanus-browser user; Chromium will run as nobody" >&2
fi
