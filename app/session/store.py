"""Where sessions live (``<workspace>/.sessions``), how they are named, listed and opened."""

from __future__ import annotations

import re
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.exceptions import SessionError
from app.session.reader import SessionData, read_session
from app.session.recorder import SessionRecorder
from app.session.writer import SessionWriter

__all__ = ["SESSIONS_DIR", "SessionInfo", "SessionStore"]

SESSIONS_DIR = ".sessions"
FORMAT_VERSION = 1
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


@dataclass(frozen=True)
class SessionInfo:
    """One line of ``--list-sessions``."""

    id: str
    path: Path
    kind: str
    program: str
    created: float
    updated: float
    state: str
    first_prompt: str | None
    problems: tuple[str, ...] = ()


class SessionStore:
    """The session files of one directory."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)

    @classmethod
    def for_workspace(cls, workspace: str | Path) -> SessionStore:
        return cls(Path(workspace) / SESSIONS_DIR)

    @staticmethod
    def new_id() -> str:
        return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)

    def path(self, session: str | Path) -> Path:
        """The file of a session id (or a path to a session file, taken as is)."""
        text = str(session)
        if text.endswith(".jsonl") or "/" in text or "\\" in text:
            return Path(text)
        if not _ID.match(text):
            raise SessionError(f"{text!r} is not a session id")
        return self.directory / f"{text}.jsonl"

    def start(self, kind: str, *, program: str = "", **header: Any) -> SessionRecorder:
        """A new session file with its header; attach agents or a flow to the recorder."""
        session_id = self.new_id()
        path = self.directory / f"{session_id}.jsonl"
        writer = SessionWriter(path, new=True)
        writer.add({"type": "session", "version": FORMAT_VERSION, "id": session_id,
                    "kind": kind, "program": program, "created": round(time.time(), 3),
                    **header})
        writer.flush_now()
        return SessionRecorder(writer, session_id)

    def reopen(self, data: SessionData) -> SessionRecorder:
        """Append to an existing session (after resuming it)."""
        writer = SessionWriter(data.path, new=False)
        if data.problems:  # make sure a cut-off last line cannot swallow the next record
            writer.add({"type": "resumed", "t": round(time.time(), 3),
                        "problems": data.problems})
            writer._pending[0] = "\n" + writer._pending[0]
        else:
            writer.add({"type": "resumed", "t": round(time.time(), 3)})
        writer.flush_now()
        return SessionRecorder(writer, data.id)

    def load(self, session: str | Path) -> SessionData:
        path = self.path(session)
        if not path.is_file():
            known = ", ".join(info.id for info in self.list(limit=5)) or "none"
            raise SessionError(f"No session {str(session)!r} in {self.directory} "
                               f"(recent: {known}); see --list-sessions")
        return read_session(path)

    def list(self, limit: int | None = 20) -> list[SessionInfo]:
        """Sessions, most recently changed first; unreadable files are listed as such."""
        if not self.directory.is_dir():
            return []
        files = sorted(self.directory.glob("*.jsonl"), key=_mtime, reverse=True)
        infos = []
        for path in files[:limit] if limit else files:
            try:
                data = read_session(path)
            except SessionError as e:
                infos.append(SessionInfo(id=path.stem, path=path, kind="?", program="",
                                         created=_mtime(path), updated=_mtime(path),
                                         state="unreadable", first_prompt=None,
                                         problems=(str(e),)))
                continue
            infos.append(SessionInfo(
                id=data.id, path=path, kind=data.kind, program=str(data.header.get("program")),
                created=float(data.header.get("created") or 0.0),
                updated=data.updated or _mtime(path), state=data.state,
                first_prompt=data.first_prompt, problems=tuple(data.problems),
            ))
        return infos


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
