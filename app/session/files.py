"""Opening session files without following links, and one process per session at a time.

The model can write the workspace, so it could swap ``.sessions`` or a session file for a
symlink: every file is opened beneath a directory descriptor with ``O_NOFOLLOW`` (a link is an
error). A session being written holds an exclusive ``flock``, so a second ``--resume`` fails at
once (``SessionBusyError``) instead of running the cut-off task twice into one file.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from app.exceptions import SessionBusyError, SessionError
from app.sandbox.files import PathChangedError, open_directory

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def _link_error(path: Path) -> SessionError:
    return SessionError(
        f"{path} is a symbolic link (or not a regular file/directory); session files are "
        "never written or read through links. Remove it, or choose another workspace."
    )


@contextmanager
def open_session_dir(directory: Path, *, create: bool) -> Iterator[int | None]:
    """A descriptor of the sessions directory (created if asked; None if missing), opened by
    the one confined opener (:func:`app.sandbox.files.open_directory`) beneath its parent, the
    operator's workspace, so a link in its place is refused, never followed."""
    parent = directory.parent
    if create:
        parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = open_directory(os.path.realpath(parent), (directory.name,), create=create, mode=0o700)
    except FileNotFoundError:
        if create:
            raise
        yield None
        return
    except (PathChangedError, NotADirectoryError) as e:
        raise _link_error(directory) from e
    try:
        yield fd
    finally:
        os.close(fd)


def open_session_file(dir_fd: int, path: Path, *, new: bool, lock: bool = True) -> int:
    """Open ``path``'s name beneath ``dir_fd`` for appending (``new``: it must not exist),
    never through a link, holding the session's lock when ``lock``."""
    flags = os.O_RDWR | os.O_APPEND | (os.O_CREAT | os.O_EXCL if new else 0)
    fd = _open_file(dir_fd, path, flags)
    try:
        if lock:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError as e:
                raise SessionBusyError(
                    f"Session {path.stem} is in use by another process (a run of it has not "
                    "ended); wait for it to finish, or start a new session."
                ) from e
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_all(fd: int) -> bytes:
    """The whole file from its start, whatever the descriptor's position."""
    chunks, offset = [], 0
    while chunk := os.pread(fd, 1 << 20, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def read_file(dir_fd: int, path: Path) -> bytes:
    """A session file's bytes, opened beneath ``dir_fd`` without following a link."""
    fd = _open_file(dir_fd, path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        return read_all(fd)
    finally:
        os.close(fd)


def _open_file(dir_fd: int, path: Path, flags: int) -> int:
    """``path``'s name beneath ``dir_fd``, a regular file reached through no link."""
    try:
        fd = os.open(path.name, flags | os.O_NOFOLLOW | _CLOEXEC, 0o600, dir_fd=dir_fd)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise _link_error(path) from e
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise _link_error(path)
    return fd


def is_locked(dir_fd: int, name: str) -> bool:
    """Whether a process is writing this session right now."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def session_files(dir_fd: int) -> list[tuple[str, float]]:
    """``(name, mtime)`` of the regular ``*.jsonl`` files in the directory; links skipped."""
    found = []
    with os.scandir(dir_fd) as entries:
        for entry in entries:
            if not entry.name.endswith(".jsonl"):
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                found.append((entry.name, st.st_mtime))
    return found
