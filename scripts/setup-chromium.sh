#!/usr/bin/env bash
# Sourced by test.sh: make sure a Chromium is installed for the browser tests (Debian's
# `chromium` package when none is found). apt-get update runs only when the package is not
# known yet. Needs root (or sudo) the first time; idempotent afterwards.
have_chromium() {
  for cand in chromium chromium-browser google-chrome google-chrome-stable; do
    command -v "$cand" >/dev/null 2>&1 && return 0
  done
  return 1
}
if ! have_chromium; then
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "error: no Chromium found and no apt-get to install it; install chromium" >&2
    exit 1
  fi
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo -n"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-cache show chromium >/dev/null 2>&1; then
    $SUDO apt-get update -qq
  fi
  $SUDO apt-get install -y -qq chromium >/dev/null
  have_chromium || { echo "error: installing chromium failed" >&2; exit 1; }
fi
