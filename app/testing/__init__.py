"""Test helpers shipped with the package: a scripted OpenAI-compatible server, a network guard.

They let our tests, and our users' tests, drive agents deterministically over real HTTP, or
in process with ``FunctionModel`` for fast unit tests. Names load lazily so that
``python -m app.testing.server`` and ``sitecustomize`` imports stay cheap and free of
double-import warnings.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.testing.function_model import FunctionInfo, FunctionModel
    from app.testing.keyed import KeyedScripts, keyed_server
    from app.testing.llama import LlamaServer, model_path
    from app.testing.proxy import RecordingProxy
    from app.testing.replies import (
        CutReply,
        DropReply,
        ErrorReply,
        RawReply,
        Reply,
        SlowReply,
        StallReply,
        TextReply,
        ToolCall,
        ToolCallsReply,
        Usage,
        call,
        cut,
        drop,
        error,
        load_script,
        raw,
        slow,
        stall,
        text,
        tool_calls,
    )
    from app.testing.server import CapturedRequest, ScriptedLLMServer
    from app.testing.test_model import TestModel, example_arguments

__all__ = [
    "CapturedRequest",
    "CutReply",
    "DropReply",
    "ErrorReply",
    "FunctionInfo",
    "FunctionModel",
    "KeyedScripts",
    "LlamaServer",
    "RawReply",
    "RecordingProxy",
    "Reply",
    "ScriptedLLMServer",
    "SlowReply",
    "StallReply",
    "TestModel",
    "TextReply",
    "ToolCall",
    "ToolCallsReply",
    "Usage",
    "call",
    "cut",
    "drop",
    "error",
    "example_arguments",
    "keyed_server",
    "load_script",
    "model_path",
    "raw",
    "slow",
    "stall",
    "text",
    "tool_calls",
]

_SERVER_NAMES = {"CapturedRequest", "ScriptedLLMServer"}
_KEYED_NAMES = {"KeyedScripts", "keyed_server"}
_FUNCTION_NAMES = {"FunctionInfo", "FunctionModel"}
_OTHER_MODULES = {
    "LlamaServer": "app.testing.llama",
    "model_path": "app.testing.llama",
    "RecordingProxy": "app.testing.proxy",
    "TestModel": "app.testing.test_model",
    "example_arguments": "app.testing.test_model",
}


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name in _OTHER_MODULES:
        module = _OTHER_MODULES[name]
    elif name in _KEYED_NAMES:
        module = "app.testing.keyed"
    elif name in _FUNCTION_NAMES:
        module = "app.testing.function_model"
    elif name in _SERVER_NAMES:
        module = "app.testing.server"
    else:
        module = "app.testing.replies"
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
