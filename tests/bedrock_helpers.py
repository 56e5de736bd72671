"""Bedrock test helpers: an AWS environment of the test's own (no ~/.aws, no instance role,
no variable of the machine), the scripted Bedrock server pointed at by it, and settings or a
model for it. ``bedrock_on(server, monkeypatch, tmp_path)`` is the factory the conformance
suite uses; ``bedrock`` the fixture for a fresh server per test."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.config import LLMSettings
from app.llm.bedrock import BedrockModel
from app.testing.bedrock_server import ScriptedBedrockServer
from tests.conftest import llm_settings

#: Upstream's example model id.
MODEL_ID = "us.anthropic.claude-3-7-sonnet-20250219-v1:0"


def isolate_aws(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    """No AWS variable of the machine, empty shared files under ``home``, the instance
    metadata service off: the credential chain sees only what the test sets."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(home / "aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(home / "aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def settings_for(server: ScriptedBedrockServer, **overrides: Any) -> LLMSettings:
    """An ``api_type = "aws"`` profile on ``server``: fast retries, no waiting on backoff."""
    values: dict[str, Any] = {
        "model": MODEL_ID,
        "api_type": "aws",
        "api_key": "bear",  # upstream's unused key
        "aws_region": server.region,
    }
    return llm_settings(server, **{**values, **overrides})  # type: ignore[arg-type]


def bedrock_on(
    server: ScriptedBedrockServer, monkeypatch: pytest.MonkeyPatch, home: Path, **overrides: Any
) -> BedrockModel:
    """A Bedrock model on ``server`` (started), signing with the server's key pair."""
    isolate_aws(monkeypatch, home)
    for name, value in server.env().items():
        if name != "AWS_ENDPOINT_URL_BEDROCK_RUNTIME":
            monkeypatch.setenv(name, value)
    return BedrockModel.from_settings(settings_for(server, **overrides))


@contextlib.contextmanager
def scripted_bedrock(
    monkeypatch: pytest.MonkeyPatch, home: Path, **options: Any
) -> Iterator[ScriptedBedrockServer]:
    """A scripted Bedrock server (``options`` as its constructor takes them), the environment
    isolated and holding its key pair; a test module's fixture yields from it."""
    with ScriptedBedrockServer(**options) as server:
        isolate_aws(monkeypatch, home)
        for name, value in server.env().items():
            if name != "AWS_ENDPOINT_URL_BEDROCK_RUNTIME":  # base_url names it
                monkeypatch.setenv(name, value)
        yield server
