"""Tar archives between the host and a container, extracted without trusting their content.

A container is controlled by model-written code, so an archive coming out of it may hold
absolute paths, ``..`` components, links pointing out of the destination, device files or
setuid bits. Every member is checked before anything is written, and extraction also uses
Python's ``data`` filter as a second line.
"""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

from app.exceptions import SandboxError

__all__ = ["MAX_ARCHIVE_BYTES", "make_tar", "safe_extract"]

#: Largest archive accepted from a container (a hostile one could be endless).
MAX_ARCHIVE_BYTES = 512 * 1024 * 1024


def make_tar(source: Path, arcname: str | None = None) -> bytes:
    """A tar archive of a file or directory (symlinks stored as links, never followed)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(str(source), arcname=arcname or source.name, recursive=True)
    return buffer.getvalue()


def _check_member(member: tarfile.TarInfo, dest: Path) -> None:
    name = member.name
    if name.startswith(("/", "\\")) or os.path.isabs(name):
        raise SandboxError(f"refusing archive member with an absolute path: {name!r}")
    target = Path(os.path.realpath(dest / name))
    if not (target == dest or target.is_relative_to(dest)):
        raise SandboxError(f"refusing archive member outside the destination: {name!r}")
    if member.isdev() or member.isfifo():
        raise SandboxError(f"refusing device or pipe in archive: {name!r}")
    if member.issym() or member.islnk():
        link = member.linkname
        base = (dest / name).parent if member.issym() else dest
        if os.path.isabs(link):
            raise SandboxError(f"refusing link to an absolute path: {name!r} -> {link!r}")
        resolved = Path(os.path.realpath(base / link))
        if not (resolved == dest or resolved.is_relative_to(dest)):
            raise SandboxError(f"refusing link out of the destination: {name!r} -> {link!r}")


def safe_extract(data: bytes, dest: Path) -> list[str]:
    """Extract ``data`` (a tar archive) into ``dest``; SandboxError if any member is unsafe.

    Nothing is written when a member is refused: all members are checked first.
    """
    if len(data) > MAX_ARCHIVE_BYTES:
        raise SandboxError(f"archive of {len(data)} bytes is over the {MAX_ARCHIVE_BYTES} limit")
    dest = Path(os.path.realpath(dest))
    dest.mkdir(parents=True, exist_ok=True)
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
            members = tar.getmembers()
            for member in members:
                _check_member(member, dest)
            tar.extractall(dest, members=members, filter="data")
    except tarfile.TarError as exc:
        raise SandboxError(f"unusable archive: {exc}") from exc
    return [m.name for m in members]
