"""Inspecting processes through /proc, independently of the code under test."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = [
    "ROOT",
    "alive",
    "live_group_members",
    "processes_in",
    "processes_mentioning",
    "short_temp_dir",
    "stat",
]

ROOT = Path(__file__).resolve().parent.parent


def stat(pid: int) -> tuple[str, int] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()
    return fields[0].decode(), int(fields[2])


def alive(pid: int) -> bool:
    """Running or sleeping; a zombie is dead (it only waits to be reaped)."""
    info = stat(pid)
    return info is not None and info[0] not in ("Z", "X")


def live_group_members(pgid: int) -> list[int]:
    members = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            info = stat(int(name))
            if info is not None and info[1] == pgid and info[0] not in ("Z", "X"):
                members.append(int(name))
    return members


def processes_in(directory: Path) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cwd = os.readlink(f"/proc/{name}/cwd")
        except OSError:
            continue
        if cwd == str(directory) and alive(int(name)):
            found.append(int(name))
    return found


def processes_mentioning(text: str) -> list[int]:
    """Live processes whose command line contains ``text`` (arguments joined by spaces)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if text.encode() in cmdline and alive(int(name)):
            found.append(int(name))
    return found


def short_temp_dir(prefix: str) -> Path:
    """A new directory right under /tmp, for programs whose Unix socket paths must fit in 107
    bytes (Ray's): pytest's temp dirs are longer under xdist (``.../popen-gw0/...``)."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
