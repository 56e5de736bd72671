"""Tool-call arguments as models send them (see ``app.llm.arguments``, where they are decoded
at the model layer's edge); re-exported here for the tools."""

from __future__ import annotations

from app.llm.arguments import TOO_DEEP, normalize_arguments, parse_arguments

__all__ = ["TOO_DEEP", "normalize_arguments", "parse_arguments"]
