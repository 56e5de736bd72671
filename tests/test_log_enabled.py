"""``log_enabled``: hot paths skip building log messages no sink would take."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from loguru import logger as base_logger

from app.logger import define_log_level, log_enabled


@pytest.fixture(autouse=True)
def restore_logger() -> Iterator[None]:
    yield
    base_logger.remove()
    base_logger.add(lambda message: sys.stderr.write(message), level="DEBUG")


def test_follows_the_most_verbose_sink(tmp_path: Path) -> None:
    define_log_level("WARNING", "OFF")
    assert not log_enabled("INFO") and log_enabled("WARNING") and log_enabled("ERROR")
    define_log_level("WARNING", "DEBUG", log_dir=tmp_path)
    assert log_enabled("DEBUG")


def test_everything_off() -> None:
    define_log_level("OFF", "OFF")
    assert not log_enabled("ERROR")


def test_an_unknown_level_counts_as_on() -> None:
    define_log_level("ERROR", "OFF")
    assert log_enabled("NO_SUCH_LEVEL")
