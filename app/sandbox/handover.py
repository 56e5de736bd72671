"""Handing a workspace to the unprivileged user that runs sandboxed code (bubblewrap as root).
That user may change the tree meanwhile, so every entry is opened from its parent's descriptor
with ``O_NOFOLLOW`` and ``fchown``ed by descriptor; other mounts, hard-linked files and special
files are never handed over, and the walk is bounded (``MAX_ENTRIES``, ``MAX_DEPTH``)."""

from __future__ import annotations

import os
import stat
from collections.abc import Collection
from pathlib import Path

from app.logger import logger

#: Most entries one hand-over visits (a start must not take minutes on a huge tree).
MAX_ENTRIES = 200_000
#: Deepest level it descends to (one descriptor per level is held open).
MAX_DEPTH = 128

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a name swapped for a FIFO between lstat and open must not block the walk.
_FILE_FLAGS = (
    os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)
)

User = tuple[int, int]


def mount_id(fd: int) -> int | None:
    """The mount a descriptor lies on (``/proc/self/fdinfo``); None when unknown."""
    try:
        with open(f"/proc/self/fdinfo/{fd}", "rb") as info:
            for line in info:
                if line.startswith(b"mnt_id:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def _open_child(
    parent: int, name: str, home: tuple[int, int | None], user: User
) -> tuple[int, bool] | None:
    """Open ``name`` below ``parent`` without following it: (descriptor, is a directory), or
    None for what is never handed over (a link, another mount, a special file, gone).
    ``home``: the workspace's (device, mount id)."""
    try:
        seen = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except OSError:
        return None
    if stat.S_ISDIR(seen.st_mode):
        flags = _DIR_FLAGS
    elif stat.S_ISREG(seen.st_mode):
        flags = _FILE_FLAGS
    else:
        return None  # a symbolic link, device, socket or pipe
    try:
        fd = os.open(name, flags, dir_fd=parent)
    except OSError:
        return None  # swapped for a link (ELOOP, ENOTDIR) or removed since
    try:
        info = os.fstat(fd)
        is_dir = stat.S_ISDIR(info.st_mode)
        usable = is_dir == stat.S_ISDIR(seen.st_mode) and (is_dir or stat.S_ISREG(info.st_mode))
        usable = usable and info.st_dev == home[0]
        # The mount id costs a /proc read: only when it matters (a directory we descend into,
        # or a file about to change hands).
        if usable and (is_dir or (info.st_uid, info.st_gid) != user) and home[1] is not None:
            usable = mount_id(fd) == home[1]
    except OSError:
        usable = False
    if not usable:
        os.close(fd)
        return None
    return fd, is_dir


def _hand_over(fd: int, user: User) -> bool:
    """``fchown`` one opened entry: directories, and regular files with a single link."""
    try:
        info = os.fstat(fd)
        if (info.st_uid, info.st_gid) == user:
            return False
        if stat.S_ISDIR(info.st_mode) or (stat.S_ISREG(info.st_mode) and info.st_nlink == 1):
            os.fchown(fd, *user)
            return True
    except OSError:
        pass
    return False


def _names(fd: int) -> list[str]:
    try:
        return os.listdir(fd)
    except OSError:
        return []


def adopt_tree(workspace: Path, user: User, *, skip: Collection[str] = ()) -> int:
    """Hand ``workspace`` to ``user`` except top-level ``skip``; how many entries changed hands."""
    try:
        top = os.open(workspace, _DIR_FLAGS)
    except OSError as exc:
        logger.warning(f"cannot hand the workspace {workspace} to the sandbox's user: {exc}")
        return 0
    home = (os.fstat(top).st_dev, mount_id(top))
    changed = int(_hand_over(top, user))
    stack: list[tuple[int, list[str]]] = [(top, [n for n in _names(top) if n not in skip])]
    visited = 0
    too_deep = False
    try:
        while stack:
            fd, names = stack[-1]
            if not names:
                os.close(fd)
                stack.pop()
                continue
            visited += 1
            if visited > MAX_ENTRIES:
                logger.warning(
                    f"the workspace {workspace} has more than {MAX_ENTRIES} entries: only "
                    "part of it was handed to the sandbox's user"
                )
                break
            child = _open_child(fd, names.pop(), home, user)
            if child is None:
                continue
            child_fd, is_dir = child
            changed += _hand_over(child_fd, user)
            if is_dir and len(stack) < MAX_DEPTH:
                stack.append((child_fd, _names(child_fd)))
                continue
            too_deep = too_deep or is_dir
            os.close(child_fd)
    finally:
        for fd, _ in stack:
            os.close(fd)
    if too_deep:
        logger.warning(
            f"the workspace {workspace} is nested deeper than {MAX_DEPTH} levels: what lies "
            "below was not handed to the sandbox's user"
        )
    return changed
