"""Tar archives between the host and a container, extracted without trusting their content:
every member is checked first, then written through the confined writer (:mod:`.files`), so
a link swapped in during extraction is refused instead of followed."""

from __future__ import annotations

import contextlib
import io
import os
import tarfile
from pathlib import Path

from app.exceptions import SandboxError, ToolError
from app.sandbox.files import open_directory, write_confined

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
    """Extract a tar archive into ``dest``; SandboxError, nothing written, if a member is unsafe."""
    if len(data) > MAX_ARCHIVE_BYTES:
        raise SandboxError(f"archive of {len(data)} bytes is over the {MAX_ARCHIVE_BYTES} limit")
    dest = Path(os.path.realpath(dest))
    dest.mkdir(parents=True, exist_ok=True)
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
            members = tar.getmembers()
            for member in members:
                _check_member(member, dest)
            for member in members:
                _write_member(tar, member, dest)
    except tarfile.TarError as exc:
        raise SandboxError(f"unusable archive: {exc}") from exc
    except ToolError as exc:  # a link met on the way (PathChangedError names it)
        raise SandboxError(f"refusing to extract: {exc}") from exc
    return [m.name for m in members]


def _write_member(tar: tarfile.TarFile, member: tarfile.TarInfo, dest: Path) -> None:
    """One checked member, written beneath ``dest`` by descriptor (like the ``data`` filter:
    no set-id bits, no group/other write; a hard link becomes a copy of its target)."""
    parts = tuple(p for p in member.name.split("/") if p not in ("", "."))
    if not parts:
        return
    mode = (member.mode & 0o755) | 0o600
    if member.isdir():
        os.close(open_directory(dest, parts, create=True, mode=mode | 0o100))
    elif member.issym():
        parent = open_directory(dest, parts[:-1], create=True)
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(parts[-1], dir_fd=parent)
            os.symlink(member.linkname, parts[-1], dir_fd=parent)
        finally:
            os.close(parent)
    else:
        content = tar.extractfile(member)
        payload = content.read() if content is not None else b""
        write_confined(dest, parts, payload, mode=mode)
