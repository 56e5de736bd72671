"""Where sessions live (``<workspace>/.sessions``), how they are named, listed and opened.
Files are opened without following links and locked while written (``app.session.files``);
the bwrap and docker sandboxes hide ``.sessions`` from the code the model runs.
"""

from __future__ import annotations

import os
import re
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.exceptions import SessionError
from app.session.files import (
    is_locked,
    open_session_dir,
    open_session_file,
    read_all,
    read_file,
    session_files,
)
from app.session.reader import SessionData, read_session
from app.session.recorder import SessionRecorder
from app.session.writer import SessionWriter

SESSIONS_DIR = ".sessions"
FORMAT_VERSION = 1
#: What a session id may look like.
SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


@dataclass(frozen=True)
class SessionInfo:
    """One line of ``--list-sessions``."""

    id: str
    path: Path
    created: float
    updated: float
    state: str
    kind: str = "?"
    program: str = ""
    first_prompt: str | None = None
    problems: tuple[str, ...] = ()


class SessionStore:
    """The session files of one directory."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)

    @classmethod
    def for_workspace(cls, workspace: str | Path) -> SessionStore:
        return cls(Path(workspace) / SESSIONS_DIR)

    def path(self, session: str | Path) -> Path:
        """The file of a session id (or a path to a session file, taken as is)."""
        text = str(session)
        if text.endswith(".jsonl") or "/" in text or "\\" in text:
            return Path(text)
        if not SESSION_ID.match(text):
            raise SessionError(f"{text!r} is not a session id")
        return self.directory / f"{text}.jsonl"

    def find(self, session: str | Path) -> Path:
        """The file of an existing session; ``SessionError`` (with the recent ids) when there
        is none, so a program can check ``--resume ID`` before it sets anything up."""
        with self._opened(session) as (path, dir_fd):
            try:
                os.stat(path.name, dir_fd=dir_fd, follow_symlinks=False)
            except OSError:
                raise FileNotFoundError(path) from None
        return path

    def start(self, kind: str, *, program: str = "", **header: Any) -> SessionRecorder:
        """A new session file with its header; attach agents or a flow to the recorder."""
        session_id = time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)
        path = self.directory / f"{session_id}.jsonl"
        writer = SessionWriter(path, new=True)
        writer.add(
            {
                "type": "session",
                "version": FORMAT_VERSION,
                "id": session_id,
                "kind": kind,
                "program": program,
                "created": round(time.time(), 3),
                **header,
            }
        )
        return _recorder(writer, session_id)

    def resume(self, session: str | Path) -> tuple[SessionData, SessionRecorder]:
        """Take a session over: lock its file (``SessionBusyError`` when another process is
        running it), read it under the lock, and append a ``resumed`` record."""
        with self._opened(session) as (path, dir_fd):
            fd = open_session_file(dir_fd, path, new=False)
        try:
            data = read_session(path, read_all(fd))
        except BaseException:
            os.close(fd)
            raise
        return data, self.reopen(data, fd=fd)

    def reopen(self, data: SessionData, *, fd: int | None = None) -> SessionRecorder:
        """Append to an existing session (after resuming it); ``fd``: its file, already
        opened and locked by :meth:`resume`."""
        writer = SessionWriter(data.path, new=False, fd=fd)
        if data.problems:  # make sure a cut-off last line cannot swallow the next record
            writer.add({"type": "resumed", "t": round(time.time(), 3), "problems": data.problems})
            writer._pending[0] = "\n" + writer._pending[0]
        else:
            writer.add({"type": "resumed", "t": round(time.time(), 3)})
        return _recorder(writer, data.id)

    @contextmanager
    def _opened(self, session: str | Path) -> Iterator[tuple[Path, int]]:
        """The session's file and its directory's descriptor; a missing directory or file
        (``FileNotFoundError`` in the block) is ``SessionError`` naming the recent sessions."""
        path = self.path(session)
        with open_session_dir(path.parent, create=False) as dir_fd:
            try:
                if dir_fd is None:
                    raise FileNotFoundError(path)
                yield path, dir_fd
            except FileNotFoundError:
                known = ", ".join(info.id for info in self.list(limit=5)) or "none"
                raise SessionError(
                    f"No session {str(session)!r} in {self.directory} "
                    f"(recent: {known}); see --list-sessions"
                ) from None

    def load(self, session: str | Path) -> SessionData:
        with self._opened(session) as (path, dir_fd):
            try:
                raw = read_file(dir_fd, path)
            except FileNotFoundError:
                raise
            except OSError as e:
                raise SessionError(f"Cannot read session file {path}: {e}") from e
        return read_session(path, raw)

    def list(self, limit: int | None = 20) -> list[SessionInfo]:
        """Sessions, most recently changed first; unreadable files are listed as such, and
        one another process is writing right now as ``running``."""
        with open_session_dir(self.directory, create=False) as dir_fd:
            if dir_fd is None:
                return []
            files = sorted(session_files(dir_fd), key=lambda item: item[1], reverse=True)
            return [
                self._info(dir_fd, name, mtime)
                for name, mtime in (files[:limit] if limit else files)
            ]

    def _info(self, dir_fd: int, name: str, mtime: float) -> SessionInfo:
        path = self.directory / name
        try:
            data = read_session(path, read_file(dir_fd, path))
        except (SessionError, OSError) as e:
            return SessionInfo(path.stem, path, mtime, mtime, "unreadable", problems=(str(e),))
        state = "running" if is_locked(dir_fd, name) else data.state
        return SessionInfo(
            id=data.id,
            path=path,
            kind=data.kind,
            program=str(data.header.get("program")),
            created=float(data.header.get("created") or mtime),
            updated=data.updated or mtime,
            state=state,
            first_prompt=data.first_prompt,
            problems=tuple(data.problems),
        )


def _recorder(writer: SessionWriter, session_id: str) -> SessionRecorder:
    """The recorder of ``writer`` once its first records are on disk (else the write error)."""
    writer.flush_now()
    if writer.error is not None:
        writer.close()
        raise writer.error
    return SessionRecorder(writer, session_id)
