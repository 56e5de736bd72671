"""Starting MCP server subprocesses for the tests: our own server and the demo server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from app.config import MCPServerConfig
from app.testing.netguard import SITE_DIR
from tests.conftest import TEST_API_KEY

__all__ = [
    "DEMO",
    "PNG_B64",
    "ROOT",
    "child_env",
    "demo_config",
    "guarded_env",
    "http_server",
    "stop",
    "write_config",
]

ROOT = Path(__file__).resolve().parent.parent
DEMO = Path(__file__).resolve().parent / "mcp_servers" / "demo_server.py"
#: The 1x1 PNG the demo server's ``picture`` tool returns (kept in step with demo_server.py).
PNG_B64 = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
)


def guarded_env() -> dict[str, str]:
    """What a server subprocess needs to run our code with the network guard on."""
    return {
        "PYTHONPATH": os.pathsep.join([str(SITE_DIR), str(ROOT)]),
        "OPENMANUS_BLOCK_NETWORK": "1",
        "PYTHONUNBUFFERED": "1",
    }


def child_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "OPENMANUS"))}
    env.update(guarded_env(), HOME=str(tmp_path), OPENMANUS_LOG_DIR=str(tmp_path / "logs"))
    return env


def demo_config(**overrides: object) -> MCPServerConfig:
    values: dict[str, object] = {
        "type": "stdio",
        "command": sys.executable,
        "args": [str(DEMO)],
        "env": guarded_env(),
    }
    values.update(overrides)
    return MCPServerConfig(**values)  # type: ignore[arg-type]


@contextmanager
def http_server(args: list[str], tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """Start a server that prints ``... listening on <url>`` on stderr; yields (process, url)."""
    proc = subprocess.Popen(
        [sys.executable, *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(tmp_path),
        cwd=tmp_path,
    )
    try:
        seen = []
        assert proc.stderr is not None
        for line in proc.stderr:  # ends when the server exits
            seen.append(line)
            if "listening on " in line:
                url = line.rsplit("listening on ", 1)[1].strip()
                break
        else:
            raise AssertionError(f"server did not start: {''.join(seen)}")
        yield proc, url
    finally:
        stop(proc)


def stop(proc: subprocess.Popen[str], sig: int = signal.SIGTERM) -> int:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc.stderr is not None:
        proc.stderr.close()
    return proc.returncode


def write_config(tmp_path: Path, base_url: str = "http://127.0.0.1:9/v1") -> Path:
    """A config whose LLM is the given (scripted) server; no retries."""
    path = tmp_path / "config.toml"
    path.write_text(
        f'workspace_root = "{tmp_path / "ws"}"\n'
        "[llm]\n"
        'model = "gpt-4o-mini"\n'
        f'base_url = "{base_url}"\n'
        f'api_key = "{TEST_API_KEY}"\n'
        "max_retries = 0\n",
        encoding="utf-8",
    )
    return path
