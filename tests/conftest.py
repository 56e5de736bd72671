"""Shared fixtures: no internet, a scripted LLM server on 127.0.0.1, LLMs pointed at it."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from app.config import LLMSettings
from app.llm import LLM
from app.logger import logger
from app.testing import ScriptedLLMServer, netguard
from tests.real_model_fixtures import *  # noqa: F403  (the real-model tier's fixtures)

#: Test tiers (unit, e2e, browser, ray, real_model): every test gets exactly one.
pytest_plugins = ("tests.tiers",)

TEST_API_KEY = "sk-test-0123456789abcdefghij"


@pytest.fixture
def warnings() -> Iterator[list[str]]:
    """Messages logged at WARNING or above while the test runs."""
    seen: list[str] = []
    handler = logger.add(lambda m: seen.append(m.record["message"]), level="WARNING")
    yield seen
    logger.remove(handler)


@pytest.fixture(autouse=True, scope="session")
def _block_internet() -> Iterator[None]:
    """Every test runs with connections outside 127.0.0.1 refused at the socket layer."""
    netguard.install()
    yield
    netguard.uninstall()


@pytest.fixture(autouse=True, scope="session")
def _log_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Log files of the test process and of every program it starts go to a temporary
    directory, never into the checkout's logs/ (where parallel workers would share names)."""
    previous = os.environ.get("OPENMANUS_LOG_DIR")
    os.environ["OPENMANUS_LOG_DIR"] = str(tmp_path_factory.mktemp("logs"))
    yield
    if previous is None:
        os.environ.pop("OPENMANUS_LOG_DIR", None)
    else:
        os.environ["OPENMANUS_LOG_DIR"] = previous


@pytest.fixture(autouse=True, scope="session")
def _matplotlib_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """matplotlib (charts) keeps its font cache in a temporary directory, not in $HOME."""
    previous = os.environ.get("MPLCONFIGDIR")
    os.environ["MPLCONFIGDIR"] = str(tmp_path_factory.mktemp("mplconfig"))
    yield
    if previous is None:
        os.environ.pop("MPLCONFIGDIR", None)
    else:
        os.environ["MPLCONFIGDIR"] = previous


@pytest.fixture(autouse=True)
def _endpoint_memory(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What endpoints refused is remembered per test, never in the user's ~/.cache."""
    monkeypatch.setenv("OPENMANUS_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))


@pytest.fixture(autouse=True)
def _fresh_llm_singletons() -> Iterator[None]:
    LLM.reset_instances()
    yield
    LLM.reset_instances()


@pytest.fixture(scope="module")
def llm() -> Iterator[ScriptedLLMServer]:
    """One scripted model server for a whole module (the web UI, AG-UI and browser tests,
    whose server program is started once per module); a module may define its own."""
    with ScriptedLLMServer() as server:
        yield server


@pytest.fixture
def llm_server() -> Iterator[ScriptedLLMServer]:
    server = ScriptedLLMServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


def llm_settings(server: ScriptedLLMServer, **overrides: Any) -> LLMSettings:
    """Settings for a test model on ``server``: fast retries, no waiting on backoff."""
    values: dict[str, Any] = {
        "model": "gpt-4o-mini",
        "base_url": server.base_url,
        "api_key": TEST_API_KEY,
        "max_retries": 3,
        "retry_min_wait": 0.001,
        "retry_max_wait": 0.01,
        "timeout": 10.0,
    }
    values.update(overrides)
    return LLMSettings(**values)


@pytest.fixture
def make_llm(llm_server: ScriptedLLMServer) -> Callable[..., LLM]:
    def factory(**overrides: Any) -> LLM:
        return LLM.create(llm_config=llm_settings(llm_server, **overrides))

    return factory
