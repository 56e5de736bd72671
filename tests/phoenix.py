"""Arize Phoenix, a real trace backend, for the tracing tests: installed by
``scripts/setup-phoenix.sh`` into ``.venv-phoenix`` and started on 127.0.0.1 with free ports,
a temporary working directory and every outbound call off. A missing install fails the test
that needs it, naming the script; it is never skipped.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import threading
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from app.testing.netguard import SITE_DIR

__all__ = ["Phoenix", "start_phoenix"]

ROOT = Path(__file__).resolve().parent.parent
VENV = Path(os.environ.get("OPENMANUS_PHOENIX_VENV", ROOT / ".venv-phoenix"))
#: Under load (two cores, other suites running) Phoenix's first start has taken over a minute.
START_TIMEOUT = 240.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Phoenix:
    """A running Phoenix: ``endpoint`` takes OTLP/HTTP, ``url`` serves the UI and the API."""

    url: str
    log: Path

    @property
    def endpoint(self) -> str:
        return self.url

    def get(self, path: str, **query: Any) -> Any:
        qs = urllib.parse.urlencode(query, doseq=True)
        with urllib.request.urlopen(f"{self.url}{path}?{qs}", timeout=30) as response:
            return json.loads(response.read())

    def spans(self, project: str) -> list[dict[str, Any]]:
        """Every span of ``project``, through Phoenix's REST API (``GET /v1/projects/{project}
        /spans``, paginated)."""
        out: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            query: dict[str, Any] = {"limit": 1000}
            if cursor:
                query["cursor"] = cursor
            page = self.get(f"/v1/projects/{project}/spans", **query)
            out += page["data"]
            cursor = page.get("next_cursor")
            if not cursor:
                return out


def _env(work: Path, port: int, grpc_port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PHOENIX_", "OTEL_"))}
    env.update(
        PHOENIX_HOST="127.0.0.1",
        PHOENIX_PORT=str(port),
        PHOENIX_GRPC_PORT=str(grpc_port),
        PHOENIX_WORKING_DIR=str(work),
        # No outbound calls: no telemetry pixels, no web fonts, no WASM download, no assistant.
        PHOENIX_TELEMETRY_ENABLED="false",
        PHOENIX_ALLOW_EXTERNAL_RESOURCES="false",
        PHOENIX_DISABLE_AGENT_ASSISTANT="true",
        PHOENIX_ENABLE_MCP_SERVER="false",
        # And the network guard in the child, in case: only 127.0.0.1 is reachable.
        PYTHONPATH=str(SITE_DIR),
        OPENMANUS_BLOCK_NETWORK="1",
        HOME=str(work),
    )
    return env


@contextlib.contextmanager
def start_phoenix(work: Path) -> Iterator[Phoenix]:
    """Phoenix serving from ``work`` (its database, its log) until the block ends."""
    program = VENV / "bin" / "phoenix"
    if not program.exists():
        pytest.fail(
            f"Arize Phoenix is not installed in {VENV}: run `bash scripts/setup-phoenix.sh`",
            pytrace=False,
        )
    work.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    log = work / "phoenix.log"
    proc = subprocess.Popen(
        [str(program), "serve"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_env(work, port, _free_port()),
        cwd=work,
        start_new_session=True,
    )
    ready = threading.Event()

    def drain() -> None:  # the log, and the moment it says it listens
        assert proc.stdout is not None
        with log.open("w") as out:
            for line in proc.stdout:
                out.write(line)
                if "Uvicorn running on" in line:
                    out.flush()
                    ready.set()
        ready.set()  # it exited

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        if not ready.wait(START_TIMEOUT) or proc.poll() is not None:
            tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
            pytest.fail(f"Phoenix did not start (exit {proc.poll()}):\n{tail}", pytrace=False)
        yield Phoenix(url=f"http://127.0.0.1:{port}", log=log)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        reader.join(timeout=5)
