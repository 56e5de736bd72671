"""Bounded reading for the file editor: a numbered line range of a file of any size, and a
directory tree without following symlinks, both on descriptors opened beneath the workspace."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

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

    Memory stays bounded for a huge file or one huge line: a line is kept up to a cap (the
    rest is skipped), and the lines after the range are only counted.
    """
    scan = Scan()
    out: list[str] = []
    used = 0
    while scan.clipped_at is None and (last is None or scan.total < last):
        line = end = fh.readline(budget * 4 + 4)  # bytes worth keeping of one line
        if not line:
            break
        scan.total += 1
        clipped = False
        while not end.endswith(b"\n") and (end := fh.readline(_READ_CHUNK)):
            clipped = clipped or end != b"\n"
        if scan.total < first:
            continue
        text = line.removesuffix(b"\n").decode("utf-8", "replace").removesuffix("\r")
        row = f"{scan.total:6}\t{text}" + (" <line clipped>" if clipped else "") + "\n"
        if used + len(row) > budget:
            if out:
                scan.clipped_at = scan.total
                break
            row = row[:budget] + " <line clipped>\n"
            scan.clipped_at = scan.total + 1
        out.append(row)
        used += len(row)
        scan.first_shown = scan.first_shown or scan.total
        scan.last_shown = scan.total
    ends_line = True
    while chunk := fh.read(_READ_CHUNK):
        scan.total += chunk.count(b"\n")
        ends_line = chunk.endswith(b"\n")
    scan.total += not ends_line
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
