"""Upstream compatibility: upstream's file-listing filters and workspace-path helper."""

from __future__ import annotations

from pathlib import PurePosixPath

__all__ = ["EXCLUDED_DIRS", "EXCLUDED_EXT", "EXCLUDED_FILES", "clean_path", "should_exclude_file"]

#: Tooling files not worth showing a model.
EXCLUDED_FILES = frozenset(
    {
        ".DS_Store",
        ".gitignore",
        "package-lock.json",
        "postcss.config.js",
        "postcss.config.mjs",
        "jsconfig.json",
        "components.json",
        "tsconfig.tsbuildinfo",
        "tsconfig.json",
    }
)
#: Build output, dependencies and VCS data.
EXCLUDED_DIRS = frozenset({"node_modules", ".next", "dist", "build", ".git"})
#: Binary or data formats a text listing should skip.
EXCLUDED_EXT = frozenset(
    {
        ".ico",
        ".svg",
        ".png",
        ".jpg",
        ".jpeg",
        ".gif",
        ".bmp",
        ".tiff",
        ".webp",
        ".db",
        ".sql",
    }
)


def should_exclude_file(rel_path: str) -> bool:
    """Whether a workspace-relative path is excluded by name, directory or extension."""
    path = PurePosixPath(rel_path)
    if path.name in EXCLUDED_FILES or path.suffix.lower() in EXCLUDED_EXT:
        return True
    return any(part in EXCLUDED_DIRS for part in path.parent.parts)


def clean_path(path: str, workspace_path: str = "/workspace") -> str:
    """``path`` relative to the workspace: leading slashes and the workspace prefix removed."""
    text = path.lstrip("/")
    prefix = workspace_path.strip("/")
    if prefix and (text == prefix or text.startswith(prefix + "/")):
        text = text[len(prefix) :]
    text = text.lstrip("/")
    if text.startswith("workspace/"):
        text = text[len("workspace/") :]
    return text
