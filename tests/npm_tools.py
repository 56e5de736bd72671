"""The Node.js MCP tools of the interop tests, installed by ``scripts/setup-npm-tools.sh``.

Missing tools fail the tests that need them, naming the script: they are never skipped.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.mcp_helpers import ROOT, stop

__all__ = ["NPM_DIR", "everything_http", "node_env", "npm_bin"]

NPM_DIR = ROOT / ".npm-tools"


def npm_bin(name: str) -> Path:
    """The installed program ``name`` (fails the test with the fix when it is missing)."""
    path = NPM_DIR / "node_modules" / ".bin" / name
    if not path.exists() or shutil.which("node") is None:
        pytest.fail(
            f"{name} is not installed: run `bash scripts/setup-npm-tools.sh` (needs node, npm "
            f"and the npm registry once; see {NPM_DIR / 'install.log'})",
            pytrace=False,
        )
    return path


def node_env(**extra: str) -> dict[str, str]:
    """The environment for Node tools: no update checks, no telemetry, no proxies."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.lower().endswith("_proxy") and not k.startswith(("OPENAI", "OPENMANUS"))
    }
    env.update(
        NO_UPDATE_NOTIFIER="1",
        npm_config_update_notifier="false",
        DO_NOT_TRACK="1",
        NODE_NO_WARNINGS="1",
        **extra,
    )
    return env


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def everything_http() -> Iterator[str]:
    """server-everything over streamable HTTP; yields its 127.0.0.1 URL. It must be told its
    port, so a port another process took meanwhile (a parallel test worker) is retried."""
    program = npm_bin("mcp-server-everything")
    for attempt in range(1, 4):
        port = _free_port()
        proc = subprocess.Popen(
            [str(program), "streamableHttp"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=node_env(PORT=str(port)),
        )
        try:
            seen = []
            assert proc.stderr is not None
            for line in proc.stderr:  # ends if the server exits
                seen.append(line)
                if "listening on port" in line:
                    break
            else:
                if "EADDRINUSE" in "".join(seen) and attempt < 3:
                    continue
                raise AssertionError(f"server-everything did not start: {''.join(seen)}")
            yield f"http://127.0.0.1:{port}/mcp"
            return
        finally:
            stop(proc)
