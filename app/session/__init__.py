"""Durable sessions: every run's history in ``<workspace>/.sessions/<id>.jsonl``, written as
it goes, so a crash loses at most the step in flight, and a run can be resumed from it
(docs/sessions-and-events.md).
"""

from app.session.reader import AgentSnapshot, SessionData, read_session
from app.session.recorder import SessionRecorder
from app.session.store import SESSIONS_DIR, SessionInfo, SessionStore
from app.session.writer import SessionWriter

__all__ = [
    "SESSIONS_DIR",
    "AgentSnapshot",
    "SessionData",
    "SessionInfo",
    "SessionRecorder",
    "SessionStore",
    "SessionWriter",
    "read_session",
]
