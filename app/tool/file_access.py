"""Path confinement for tools that touch files on the model's behalf.

The model chooses the paths, so every path is treated as untrusted: it is resolved to its real
location (symlinks and ``..`` included) *before* any access, and refused unless that location is
inside one of the allowed roots. The same policy is meant to be reused by the sandbox.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from app.exceptions import ToolError

__all__ = [
    "FileAccessPolicy",
    "default_workspace",
    "is_within",
    "resolve_real",
    "resolve_workspace",
]


def default_workspace() -> Path:
    """The configured workspace; imported lazily so tools can be built without a config."""
    from app.config import config

    return Path(config.workspace_root)


def resolve_workspace(workspace: str | os.PathLike[str] | None) -> Path:
    """The directory to work in (given, else the configured one), created if missing."""
    path = Path(workspace).expanduser() if workspace is not None else default_workspace()
    path = path.resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def resolve_real(path: str | os.PathLike[str], base: Path) -> Path:
    """Absolute real path of ``path`` (relative ones are taken from ``base``).

    Existing components have their symlinks followed (also a dangling final symlink, so a link
    pointing outside cannot be written through); missing components are kept literally.
    """
    candidate = Path(path)
    if not candidate.is_absolute():
        candidate = base / candidate
    return Path(os.path.realpath(candidate))


def is_within(path: Path, root: Path) -> bool:
    """True when ``path`` is ``root`` or lies below it (both already resolved)."""
    return path == root or path.is_relative_to(root)


@dataclass(frozen=True)
class FileAccessPolicy:
    """Which directories a tool may touch: the workspace plus an optional allow-list."""

    workspace: Path
    extra_roots: tuple[Path, ...] = ()

    @classmethod
    def create(
        cls, workspace: Path | None = None, allowed_paths: Iterable[Path | str] = ()
    ) -> FileAccessPolicy:
        """Build a policy; ``workspace=None`` means the configured workspace root."""
        ws = Path(os.path.realpath(workspace if workspace is not None else default_workspace()))
        extra = tuple(Path(os.path.realpath(Path(p).expanduser())) for p in allowed_paths)
        return cls(workspace=ws, extra_roots=extra)

    @property
    def roots(self) -> tuple[Path, ...]:
        """All allowed roots, workspace first, without duplicates."""
        seen: list[Path] = []
        for root in (self.workspace, *self.extra_roots):
            if root not in seen:
                seen.append(root)
        return tuple(seen)

    def describe_roots(self) -> str:
        """The allowed roots as text for error messages."""
        return ", ".join(str(r) for r in self.roots)

    def allows(self, real_path: Path) -> bool:
        """Whether an already-resolved path lies inside an allowed root."""
        return any(is_within(real_path, root) for root in self.roots)

    def resolve(self, path: str | os.PathLike[str]) -> Path:
        """Resolve a model-supplied path and enforce confinement.

        Raises ``ToolError`` (with the allowed roots named) for empty paths, NUL bytes and any
        path whose real location is outside the roots. Shell metacharacters are not special:
        the path is only ever used as a literal file name.
        """
        raw = os.fspath(path) if isinstance(path, str | os.PathLike) else None
        if not isinstance(raw, str) or not raw.strip():
            raise ToolError("`path` must be a non-empty string naming a file or directory.")
        if "\x00" in raw:
            raise ToolError("The path contains a NUL byte, which no file name can contain.")
        real = resolve_real(raw, self.workspace)
        if not self.allows(real):
            where = "" if str(real) == raw else f" (it resolves to {real})"
            raise ToolError(
                f"Access denied: {raw}{where} is outside the allowed locations: "
                f"{self.describe_roots()}. Use a path inside the workspace {self.workspace} "
                "(relative paths are taken from there)."
            )
        return real
