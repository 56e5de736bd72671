"""Anthropic's Messages API on the scripted server, for its tests and the shared conformance
suite: a server started with a script, and settings or a model pointed at it."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from app.config import LLMSettings
from app.llm.anthropic import AnthropicModel
from app.testing.anthropic_server import SCRIPTED_API_KEY, ScriptedAnthropicServer
from app.testing.replies import Reply, call, tool_calls
from tests.conftest import llm_settings

#: A current model name (the SDK warns about retired ones).
MODEL = "claude-sonnet-4-6"
#: Its list prices per million tokens, as a [pricing] entry.
PRICE = {"input": 3.0, "output": 15.0, "cached_input": 0.3, "cache_write": 3.75}


def anthropic_settings(server: ScriptedAnthropicServer, **overrides: Any) -> LLMSettings:
    """An ``api_type = "anthropic"`` profile on ``server``: fast retries, no backoff wait."""
    values = {"api_type": "anthropic", "model": MODEL, "api_key": SCRIPTED_API_KEY}
    return llm_settings(server, **{**values, "max_tokens": 4096, **overrides})  # type: ignore[arg-type]


def notes_script(steps: int) -> list[Reply]:
    """A Manus run of ``steps`` steps: a note written per step, then terminate."""
    script: list[Reply] = [
        tool_calls(
            call(
                "str_replace_editor",
                {"command": "create", "path": f"note_{i}.txt", "file_text": f"note {i}\n"},
            ),
            content=f"Writing note {i}.",
        )
        for i in range(steps - 1)
    ]
    script.append(tool_calls(call("terminate", {"status": "success"}), content="All written."))
    return script


def anthropic_model(server: ScriptedAnthropicServer, **options: Any) -> AnthropicModel:
    """A model on ``server``; ``thinking=`` and ``prompt_cache=`` go to the model,
    anything else to its settings."""
    model_options = {k: options.pop(k) for k in ("thinking", "prompt_cache") if k in options}
    return AnthropicModel(anthropic_settings(server, **options), **model_options)


@contextmanager
def anthropic_stack(
    script: Iterable[Reply | str] = (), **options: Any
) -> Iterator[tuple[ScriptedAnthropicServer, AnthropicModel]]:
    """A started server answering ``script`` and a model on it (stopped on exit). Options
    named like the server's keywords go to the server, the rest to :func:`anthropic_model`."""
    server_keys = {
        "api_key",
        "models",
        "min_cacheable_tokens",
        "cache_ttl",
        "context_window",
        "clock",
    }
    server_options = {k: options.pop(k) for k in list(options) if k in server_keys}
    with ScriptedAnthropicServer(script, **server_options) as server:
        yield server, anthropic_model(server, **options)
