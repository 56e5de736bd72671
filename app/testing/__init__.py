"""Test helpers shipped with the package: a scripted OpenAI-compatible server, a network guard.

They let our tests, and our users' tests, drive agents deterministically over real HTTP with
the real ``openai`` client. Names load lazily so that ``python -m app.testing.server`` and
``sitecustomize`` imports stay cheap and free of double-import warnings.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.testing.keyed import KeyedScripts, keyed_server
    from app.testing.llama import LlamaServer, model_path
    from app.testing.proxy import RecordingProxy
    from app.testing.replies import (
        DropReply,
        ErrorReply,
        RawReply,
        Reply,
        SlowReply,
        TextReply,
        ToolCall,
        ToolCallsReply,
        Usage,
        call,
        drop,
        error,
        load_script,
        raw,
        slow,
        text,
        tool_calls,
    )
    from app.testing.server import CapturedRequest, ScriptedLLMServer

__all__ = [
    "CapturedRequest",
    "DropReply",
    "ErrorReply",
    "KeyedScripts",
    "LlamaServer",
    "RawReply",
    "RecordingProxy",
    "Reply",
    "ScriptedLLMServer",
    "SlowReply",
    "TextReply",
    "ToolCall",
    "ToolCallsReply",
    "Usage",
    "call",
    "drop",
    "error",
    "keyed_server",
    "load_script",
    "model_path",
    "raw",
    "slow",
    "text",
    "tool_calls",
]

_SERVER_NAMES = {"CapturedRequest", "ScriptedLLMServer"}
_KEYED_NAMES = {"KeyedScripts", "keyed_server"}
_OTHER_MODULES = {
    "LlamaServer": "app.testing.llama",
    "model_path": "app.testing.llama",
    "RecordingProxy": "app.testing.proxy",
}


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name in _OTHER_MODULES:
        module = _OTHER_MODULES[name]
    elif name in _KEYED_NAMES:
        module = "app.testing.keyed"
    elif name in _SERVER_NAMES:
        module = "app.testing.server"
    else:
        module = "app.testing.replies"
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
