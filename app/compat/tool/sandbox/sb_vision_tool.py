"""Upstream compatibility: ``sandbox_vision`` (Daytona); building it raises "not supported"."""

from __future__ import annotations

from app.compat.daytona.tool_base import SandboxToolsBase

__all__ = [
    "DEFAULT_JPEG_QUALITY",
    "DEFAULT_MAX_HEIGHT",
    "DEFAULT_MAX_WIDTH",
    "DEFAULT_PNG_COMPRESS_LEVEL",
    "MAX_COMPRESSED_SIZE",
    "MAX_IMAGE_SIZE",
    "SandboxVisionTool",
]

#: Upstream's image limits, kept for code importing them.
MAX_IMAGE_SIZE = 10 * 1024 * 1024
MAX_COMPRESSED_SIZE = 5 * 1024 * 1024
DEFAULT_MAX_WIDTH = 1920
DEFAULT_MAX_HEIGHT = 1080
DEFAULT_JPEG_QUALITY = 85
DEFAULT_PNG_COMPRESS_LEVEL = 6


class SandboxVisionTool(SandboxToolsBase):
    name: str = "sandbox_vision"
    description: str = "Works with images inside a Daytona cloud sandbox (not supported here)."
