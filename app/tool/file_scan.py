"""Bounded reading for the file editor: number a line range of a file of any size, and list
a directory tree without following symlinks. Both work on descriptors opened beneath the
workspace (``app.sandbox.files``), never on path names a symlink swap could redirect. Kept
apart so the editor module stays about editing."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

__all__ = ["Scan", "displayable", "list_dir", "scan_file"]

_READ_CHUNK = 1 << 20


def displayable(text: str) -> str:
    """Text safe to send to the model: undecodable bytes (kept as surrogates) shown as U+FFFD."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8", "replace")


@dataclass
class Scan:
    """What a streaming pass over a file saw."""

    text: str = ""
    total: int = 0  # number of lines in the file
    first_shown: int = 0
    last_shown: int = 0
    clipped_at: int | None = None  # first wanted line left out for lack of room


def scan_file(fh: BinaryIO, first: int, last: int | None, budget: int) -> Scan:
    """Number lines ``first..last`` of a file of any size within ``budget`` characters.

    Reads in chunks and never holds more than one (clipped) line, so a huge file, or one huge
    line, costs bounded memory; the remaining lines are only counted.
    """
    scan = Scan()
    out: list[str] = []
    used = 0
    line_cap = budget * 4 + 4  # bytes worth keeping of one line
    partial = bytearray()
    partial_overflow = False
    total = 0
    at_line_start = True

    def wanted(no: int) -> bool:
        return scan.clipped_at is None and no >= first and (last is None or no <= last)

    def emit(no: int) -> None:
        nonlocal used
        text = bytes(partial).decode("utf-8", "replace").removesuffix("\r")
        row = f"{no:6}\t{text}"
        if partial_overflow:
            row += " <line clipped>"
        row += "\n"
        if used + len(row) > budget:
            if out:
                scan.clipped_at = no
                return
            row = row[:budget] + " <line clipped>\n"
            scan.clipped_at = no + 1
        out.append(row)
        used += len(row)
        scan.first_shown = scan.first_shown or no
        scan.last_shown = no

    while chunk := fh.read(_READ_CHUNK):
        pos, size = 0, len(chunk)
        while pos < size:
            no = total + 1
            if not wanted(no):
                if scan.clipped_at is not None or (last is not None and no > last):
                    total += chunk.count(b"\n", pos)
                    at_line_start = chunk.endswith(b"\n")
                    break
                nl = chunk.find(b"\n", pos)
                if nl < 0:
                    at_line_start = False
                    break
                total += 1
                at_line_start = True
                pos = nl + 1
                continue
            nl = chunk.find(b"\n", pos)
            end = size if nl < 0 else nl
            room = line_cap - len(partial)
            if room > 0:
                partial += chunk[pos : min(end, pos + room)]
            if end - pos > room:
                partial_overflow = True
            if nl < 0:
                at_line_start = False
                break
            emit(no)
            partial.clear()
            partial_overflow = False
            total += 1
            at_line_start = True
            pos = nl + 1
    if not at_line_start:  # a last line without a final newline
        total += 1
        if wanted(total):
            emit(total)
    scan.total = total
    scan.text = "".join(out)
    return scan


def list_dir(root: Path, root_fd: int, depth: int, limit: int) -> tuple[list[str], bool]:
    """Entries under the directory open as ``root_fd`` (shown as ``root``) up to ``depth``
    levels, hidden ones skipped, symlinks not followed (subdirectories are opened with
    ``O_NOFOLLOW`` from their parent's descriptor)."""
    rows: list[str] = []
    truncated = False
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)

    def walk(directory: Path, fd: int, level: int) -> None:
        nonlocal truncated
        try:
            with os.scandir(fd) as it:
                visible = [e for e in it if not e.name.startswith(".")]
            entries = sorted(visible, key=lambda e: e.name)
        except OSError as exc:
            rows.append(f"{directory}/  <unreadable: {exc.strerror or exc}>")
            return
        for entry in entries:
            if len(rows) >= limit:
                truncated = True
                return
            try:
                is_link = entry.is_symlink()
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_link = is_dir = False
            suffix = "@" if is_link else "/" if is_dir else ""
            rows.append(displayable(f"{directory / entry.name}{suffix}"))
            if is_dir and level < depth:
                try:
                    sub = os.open(entry.name, flags, dir_fd=fd)
                except OSError:  # replaced by a link (or removed) since it was listed
                    continue
                try:
                    walk(directory / entry.name, sub, level + 1)
                finally:
                    os.close(sub)

    walk(root, root_fd, 1)
    return rows, truncated
