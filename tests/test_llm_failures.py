"""``app.llm.failures``, the reading of failures every wire model shares: the wait a server
asks for (``Retry-After``), hostile values included, through each wire model's whole stack
against its scripted server; and error texts cleaned of credentials."""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from app.exceptions import LLMAuthenticationError
from app.llm import LLM
from app.llm.failures import redacted, retry_after
from app.schema import Message
from app.testing import ScriptedLLMServer, error, text
from app.testing.anthropic_server import ScriptedAnthropicServer
from tests.anthropic_helpers import anthropic_settings
from tests.bedrock_helpers import scripted_bedrock, settings_for
from tests.conftest import llm_settings


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "2"}, 2.0),
        ({"retry-after": " 0.25 "}, 0.25),
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
        ({"retry-after-ms": "soon", "retry-after": "3"}, 3.0),
        ({"retry-after": "-4"}, 0.0),
        ({}, None),
        (None, None),
        ({"retry-after": ""}, None),
        ({"retry-after": "whenever"}, None),
        # Hostile values: NaN would make the retry sleep forever, infinity end it at once.
        ({"retry-after": "nan"}, None),
        ({"retry-after": "NaN"}, None),
        ({"retry-after": "inf"}, None),
        ({"retry-after": "-inf"}, None),
        ({"retry-after": "1e999"}, None),
        ({"retry-after-ms": "nan", "retry-after": "2"}, 2.0),
    ],
)
def test_retry_after_reads_seconds_and_refuses_what_is_no_finite_number(
    headers: dict[str, str] | None, seconds: float | None
) -> None:
    assert retry_after(headers) == seconds


def test_retry_after_reads_an_http_date() -> None:
    later = email.utils.formatdate(time.time() + 120, usegmt=True)
    waited = retry_after({"retry-after": later})
    assert waited is not None and 100 < waited <= 120
    earlier = email.utils.formatdate(time.time() - 120, usegmt=True)
    assert retry_after({"retry-after": earlier}) == 0.0


def test_redacted_takes_keys_out_of_the_message_and_the_args() -> None:
    key = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0" * 2
    error_ = redacted(LLMAuthenticationError(f"Incorrect API key provided: {key}"))
    assert key not in error_.message and key not in str(error_)
    assert error_.args == (error_.message,)


# --- a hostile Retry-After through each wire model's stack ---------------------------------


@contextmanager
def openai_llm(script: list[Any], _: pytest.MonkeyPatch, __: Path) -> Iterator[tuple[Any, LLM]]:
    with ScriptedLLMServer(script) as server:
        yield server, LLM.create(llm_config=llm_settings(server))


@contextmanager
def anthropic_llm(script: list[Any], _: pytest.MonkeyPatch, __: Path) -> Iterator[tuple[Any, LLM]]:
    with ScriptedAnthropicServer(script) as server:
        yield server, LLM.create(llm_config=anthropic_settings(server))


@contextmanager
def bedrock_llm(
    script: list[Any], monkeypatch: pytest.MonkeyPatch, home: Path
) -> Iterator[tuple[Any, LLM]]:
    with scripted_bedrock(monkeypatch, home) as server:
        server.push(*script)
        yield server, LLM.create(llm_config=settings_for(server))


STACKS: dict[str, Callable[..., Any]] = {
    "openai": openai_llm,
    "anthropic": anthropic_llm,
    "bedrock": bedrock_llm,
}


@pytest.mark.parametrize("wire", list(STACKS))
@pytest.mark.parametrize("hostile", ["nan", "inf"])
async def test_a_rate_limit_with_a_hostile_retry_after_is_retried_with_backoff(
    wire: str, hostile: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    script = [error(429, headers={"Retry-After": hostile}), text("answered")]
    with STACKS[wire](script, monkeypatch, tmp_path) as (server, llm):
        # A deadline, not a timing: a NaN wait used to sleep forever.
        answer = await asyncio.wait_for(llm.ask([Message.user_message("hi")], stream=False), 60)
        await llm.aclose()
        assert answer == "answered"
        assert server.remaining == 0 and server.errors == []
