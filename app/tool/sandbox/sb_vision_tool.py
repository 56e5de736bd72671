"""Upstream compatibility: re-exports upstream's ``app.tool.sandbox.sb_vision_tool`` from
:mod:`app.compat.tool.sandbox.sb_vision_tool`."""

from app.compat.tool.sandbox.sb_vision_tool import (
    DEFAULT_JPEG_QUALITY,
    DEFAULT_MAX_HEIGHT,
    DEFAULT_MAX_WIDTH,
    DEFAULT_PNG_COMPRESS_LEVEL,
    MAX_COMPRESSED_SIZE,
    MAX_IMAGE_SIZE,
    SandboxVisionTool,
)

__all__ = [
    "DEFAULT_JPEG_QUALITY",
    "DEFAULT_MAX_HEIGHT",
    "DEFAULT_MAX_WIDTH",
    "DEFAULT_PNG_COMPRESS_LEVEL",
    "MAX_COMPRESSED_SIZE",
    "MAX_IMAGE_SIZE",
    "SandboxVisionTool",
]
