#!/usr/bin/env bash
# A Docker engine and the sandbox image, for `[sandbox] backend = "docker"` and its tests.
# Idempotent; `source` it (scripts/test.sh does) or run it. It
#   1. installs Debian's docker.io when no `docker` engine answers and dockerd is missing;
#   2. starts dockerd when it is not running, and stops it again when the calling process
#      (the shell that sourced this, or whatever it `exec`s, e.g. pytest) exits: only what
#      this script started is stopped;
#   3. builds the image $OPENMANUS_SANDBOX_IMAGE (default openmanus-sandbox:latest) offline
#      from Debian packages (mmdebstrap | docker import, then a short Dockerfile), labelled
#      with a stamp of its recipe: a second run finds the stamp and takes about a second.
# Where no engine can run at all (no root, no apt, dockerd refuses to start) it says why and
# returns 0: the Docker tests then skip with that reason. OPENMANUS_NO_DOCKER=1 skips it all.
# Set OPENMANUS_DOCKER_IMAGE_ALIAS=python:3.12-slim to also tag the image the way upstream's
# tests name it (never done by default: it would shadow Docker Hub's image of that name).

_om_docker_main() {
  local sourced="$1"
  local image="${OPENMANUS_SANDBOX_IMAGE:-openmanus-sandbox:latest}"
  local log="${TMPDIR:-/tmp}/openmanus-dockerd.log"
  local suite=bookworm
  local packages="python3,bash,coreutils,util-linux,procps,ca-certificates"
  local dockerfile
  dockerfile=$(
    cat <<'EOF'
ARG BASE
FROM ${BASE}
RUN mkdir -p /workspace && chmod 1777 /workspace && \
    (getent passwd sandbox >/dev/null || useradd --uid 1000 --user-group --no-create-home \
        --home-dir /workspace --shell /bin/bash sandbox)
ENV LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /workspace
CMD ["sleep", "infinity"]
EOF
  )
  local stamp
  stamp=$(printf '%s\n%s\n%s\n' "$suite" "$packages" "$dockerfile" | sha256sum | cut -c1-16)

  if [ "${OPENMANUS_NO_DOCKER:-0}" = "1" ]; then
    echo "setup-docker: OPENMANUS_NO_DOCKER=1, skipped (Docker tests will skip)" >&2
    return 0
  fi
  export DEBIAN_FRONTEND=noninteractive
  local apt=(apt-get install -y -qq -o DPkg::Lock::Timeout=600)
  if ! docker info >/dev/null 2>&1; then
    if ! command -v dockerd >/dev/null 2>&1; then
      if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        echo "setup-docker: no Docker engine and cannot install one (needs root and apt-get)" >&2
        return 0
      fi
      "${apt[@]}" docker.io >/dev/null 2>&1 ||
        { apt-get update -qq -o DPkg::Lock::Timeout=600 && "${apt[@]}" docker.io >/dev/null; } ||
        { echo "setup-docker: installing docker.io failed" >&2; return 0; }
    fi
    if ! pgrep -x dockerd >/dev/null 2>&1; then
      if [ "$(id -u)" != 0 ]; then
        echo "setup-docker: dockerd is not running and only root can start it here" >&2
        return 0
      fi
      # A new session: Ctrl-C in this terminal must not take the engine down mid-cleanup.
      setsid dockerd >"$log" 2>&1 </dev/null &
      local dockerd_pid=$!
      export OPENMANUS_DOCKERD_STARTED="$dockerd_pid"
      if [ "$sourced" = 1 ]; then
        # Stop it when the caller (the sourcing shell, or the program it exec'd) is gone.
        setsid bash -c 'tail --pid="$1" -f /dev/null; kill "$2" 2>/dev/null' _ \
          "$$" "$dockerd_pid" </dev/null >/dev/null 2>&1 &
      else
        echo "setup-docker: started dockerd (pid $dockerd_pid, log $log); it keeps running" >&2
      fi
    fi
    local tries=0
    until docker info >/dev/null 2>&1; do
      tries=$((tries + 1))
      if [ "$tries" -gt 60 ]; then
        echo "setup-docker: dockerd did not answer within 30 s (log: $log)" >&2
        return 0
      fi
      sleep 0.5
    done
  fi

  local have
  have=$(docker image inspect -f '{{ index .Config.Labels "openmanus.stamp" }}' "$image" 2>/dev/null || true)
  if [ "$have" != "$stamp" ]; then
    if ! command -v mmdebstrap >/dev/null 2>&1; then
      "${apt[@]}" mmdebstrap >/dev/null 2>&1 ||
        { apt-get update -qq -o DPkg::Lock::Timeout=600 && "${apt[@]}" mmdebstrap >/dev/null; } ||
        { echo "setup-docker: installing mmdebstrap failed; no sandbox image" >&2; return 0; }
    fi
    echo "setup-docker: building $image from Debian $suite packages (about a minute)" >&2
    local base="openmanus-sandbox-base:$stamp"
    if ! docker image inspect "$base" >/dev/null 2>&1; then
      mmdebstrap --quiet --variant=minbase --include="$packages" "$suite" - |
        docker import - "$base" >/dev/null ||
        { echo "setup-docker: building the base image failed" >&2; return 0; }
    fi
    local context
    context=$(mktemp -d)
    printf '%s\n' "$dockerfile" >"$context/Dockerfile"
    local out
    out=$(DOCKER_BUILDKIT=0 docker build -q --network none --build-arg BASE="$base" \
      --label "openmanus.stamp=$stamp" -t "$image" "$context" 2>&1) ||
      { rm -rf "$context"; echo "setup-docker: docker build failed: $out" >&2; return 0; }
    rm -rf "$context"
    # Base images of older recipes are no longer needed.
    docker images --format '{{.Repository}}:{{.Tag}}' openmanus-sandbox-base |
      grep -v ":$stamp\$" | xargs -r docker rmi >/dev/null 2>&1 || true
  fi
  if [ -n "${OPENMANUS_DOCKER_IMAGE_ALIAS:-}" ]; then
    docker tag "$image" "$OPENMANUS_DOCKER_IMAGE_ALIAS"
  fi
  export OPENMANUS_SANDBOX_IMAGE="$image"
}

if [ "${BASH_SOURCE[0]}" != "$0" ]; then _om_docker_main 1; else _om_docker_main 0; fi
unset -f _om_docker_main
