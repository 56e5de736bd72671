"""All the web sessions of one server: new ones, open ones, and those on disk to reopen."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

from app.exceptions import SessionBusyError, SessionError
from app.logger import logger
from app.session import SessionStore
from app.session.store import SESSION_ID
from app.web.eventlog import redact_tree
from app.web.session import Mode, WebSession, history_entries


class UnknownSession(LookupError):
    """No session with that id, live or on disk."""


class SessionManager:
    """Sessions live under ``root`` (``<workspace>/web``): one directory each, and the
    session files together in ``root/.sessions`` where no session's tools can reach them."""

    def __init__(self, root: Path, *, options: dict[str, Any] | None = None) -> None:
        self.root = root
        self.options = dict(options or {})
        self.store = SessionStore(root / ".sessions")
        self.sessions: dict[str, WebSession] = {}
        self._opening: dict[str, asyncio.Lock] = {}

    def check_id(self, session_id: str) -> str:
        if not SESSION_ID.match(session_id or ""):
            raise UnknownSession(f"{session_id!r} is not a session id")
        return session_id

    async def create(self, mode: Mode) -> WebSession:
        """A new session with its own workspace and session file."""
        self.root.mkdir(parents=True, exist_ok=True)
        recorder = await asyncio.to_thread(
            self.store.start, mode, program="openmanus_web", web=True
        )
        session = WebSession(
            recorder.session_id, mode, self.root / recorder.session_id, options=self.options
        )
        try:
            await session.build()
        except BaseException:
            await recorder.close()
            raise
        session.attach(recorder, already_written=False)
        self.sessions[session.id] = session
        return session

    def live(self, session_id: str) -> WebSession:
        """An open session; ``UnknownSession`` when it is not open."""
        session = self.sessions.get(self.check_id(session_id))
        if session is None:
            raise UnknownSession(f"No open session {session_id!r}")
        return session

    async def open(self, session_id: str) -> WebSession:
        """The open session, or the one on disk reopened (locked, restored, its history in
        the event log). ``UnknownSession``, ``SessionBusyError``, ``SessionError``."""
        self.check_id(session_id)
        lock = self._opening.setdefault(session_id, asyncio.Lock())
        async with lock:
            if session_id in self.sessions:
                return self.sessions[session_id]
            try:
                data, recorder = await asyncio.to_thread(self.store.resume, session_id)
            except SessionBusyError:
                raise
            except SessionError as e:
                if "No session" in str(e):
                    raise UnknownSession(f"No session {session_id!r}") from None
                raise
            mode: Mode = "flow" if data.kind == "flow" else "agent"
            session = WebSession(data.id, mode, self.root / data.id, options=self.options)
            try:
                await session.build()
                session.restore(data)
                for entry in history_entries(data.raw, mode):
                    session.log.append(entry)
                    session.runs = max(session.runs, int(entry.get("run") or 0))
                session.attach(recorder, already_written=True)
            except BaseException:
                await recorder.close()
                with contextlib.suppress(Exception):
                    await session.close()
                raise
            self.sessions[session.id] = session
            return session

    async def listing(self) -> list[dict[str, Any]]:
        """Open sessions first, then the rest from disk, newest first."""
        try:
            stored = await asyncio.to_thread(self.store.list, 200)
        except (SessionError, OSError) as e:
            logger.warning(f"Cannot list web sessions: {e}")
            stored = []
        # The open sessions' states are read after the disk (which takes a while), so the
        # answer is as fresh as it can be when it leaves.
        infos = [s.info() for s in sorted(self.sessions.values(), key=lambda s: -s.created)]
        for item in stored:
            if item.id in self.sessions:
                continue
            infos.append(
                redact_tree(
                    {
                        "id": item.id,
                        "mode": item.kind,
                        "title": item.first_prompt or "",
                        "state": item.state,
                        "running": False,
                        "live": False,
                        "incomplete": item.state in ("interrupted", "incomplete"),
                        "created": item.created,
                        "problems": list(item.problems),
                    }
                )
            )
        return infos

    def end_streams(self) -> None:
        """Let every open event stream finish (the server is stopping)."""
        for session in self.sessions.values():
            session.log.close()

    async def shutdown(self) -> None:
        """Stop every task and close every session (the session files stay resumable)."""
        sessions, self.sessions = list(self.sessions.values()), {}
        await asyncio.gather(*(s.close() for s in sessions), return_exceptions=True)
