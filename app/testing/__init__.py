"""Test helpers shipped with the package: a scripted OpenAI-compatible server, a network guard.

They let our tests, and our users' tests, drive agents deterministically over real HTTP, or
in process with ``FunctionModel`` (a model on our typed messages) or ``TestModel`` for fast
unit tests; ``FunctionTransport`` is the wire-level double of an OpenAI-compatible endpoint.
The server's command line is ``python -m app.testing.server``; child interpreters load the
network guard through ``app/testing/_site`` without importing this package.
"""

from app.testing.function_model import FunctionInfo, FunctionModel
from app.testing.function_transport import FunctionTransport, TransportInfo
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
from app.testing.scripted import ScriptedLLMServer
from app.testing.test_model import TestModel, example_arguments
from app.testing.wire import CapturedRequest

__all__ = [
    "CapturedRequest",
    "CutReply",
    "DropReply",
    "ErrorReply",
    "FunctionInfo",
    "FunctionModel",
    "FunctionTransport",
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
    "TransportInfo",
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
