"""Path confinement for tools that touch files on the model's behalf.

The policy itself lives in the lower layer (:mod:`app.sandbox.files`), where every access is
made beneath a descriptor of the workspace so a symlink swapped in mid-way cannot lead
outside; this module keeps the tools' import path.
"""

from __future__ import annotations

from app.sandbox.files import (
    ConfinedPath,
    FileAccessPolicy,
    PathChangedError,
    default_workspace,
    is_within,
    resolve_real,
    resolve_workspace,
)

__all__ = [
    "ConfinedPath",
    "FileAccessPolicy",
    "PathChangedError",
    "default_workspace",
    "is_within",
    "resolve_real",
    "resolve_workspace",
]
