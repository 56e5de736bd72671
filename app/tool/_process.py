"""Re-export: the process plumbing lives in the sandbox layer (``app.sandbox.processes``)."""

from __future__ import annotations

from app.sandbox.processes import (
    OutputBuffer,
    PipeProtocol,
    compose_streams,
    describe_returncode,
    format_seconds,
    group_members,
    kill_group,
    signal_group,
    terminate_group,
)

__all__ = [
    "OutputBuffer",
    "PipeProtocol",
    "compose_streams",
    "describe_returncode",
    "format_seconds",
    "group_members",
    "kill_group",
    "signal_group",
    "terminate_group",
]
