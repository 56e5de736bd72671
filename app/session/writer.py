"""Appending records to a session file: one JSON object per line, secrets replaced, written
at each checkpoint in a worker thread. After a failed write (a full disk) nothing more is
written, so the file reads as incomplete, not as a finished run with turns missing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from app.exceptions import SessionWriteError
from app.logger import logger
from app.redaction import redact_text
from app.session.files import open_session_dir, open_session_file
from app.text import clean_text


def encode_record(record: dict[str, Any]) -> str:
    """One line of JSON with every registered secret (API keys..., in any encoding) replaced
    by ``***``: the outward redactor, registered secrets only (a resumed model reads this
    conversation back, so credential-shaped text it wrote stays as written)."""
    text = json.dumps(record, ensure_ascii=False, default=str, separators=(",", ":"))
    return redact_text(text, registered_only=True) + "\n"


class SessionWriter:
    """Owns one session file (and its lock); ``add`` buffers, ``flush`` writes."""

    def __init__(self, path: Path, *, new: bool = True, fd: int | None = None) -> None:
        self.path = path
        if fd is None:
            with open_session_dir(path.parent, create=True) as dir_fd:
                assert dir_fd is not None
                fd = open_session_file(dir_fd, path, new=new)
        self._fd: int | None = fd
        self._pending: list[str] = []
        self._thread_lock = threading.Lock()
        self._flush_lock: asyncio.Lock | None = None
        self.error: SessionWriteError | None = None

    def add(self, record: dict[str, Any]) -> None:
        self._pending.append(encode_record(record))

    async def flush(self) -> None:
        """Write what is buffered, in order, without blocking the event loop."""
        if not self._pending:
            return
        if self._flush_lock is None:
            self._flush_lock = asyncio.Lock()
        async with self._flush_lock:
            lines, self._pending = self._pending, []
            if lines:
                await asyncio.to_thread(self._write, "".join(lines))

    def flush_now(self) -> None:
        """Write synchronously (at exit, when no event loop may be running)."""
        lines, self._pending = self._pending, []
        if lines:
            self._write("".join(lines))

    def _write(self, text: str) -> None:
        with self._thread_lock:
            if self._fd is None or self.error is not None:
                return
            try:
                _write_all(self._fd, _utf8(text))
            except OSError as e:
                self.error = SessionWriteError(
                    f"Cannot write the session file {self.path}: {e.strerror or e}. It stops at "
                    "the last record written and reads as incomplete; --resume carries on from "
                    "there."
                )
                logger.error(str(self.error))

    def close(self) -> None:
        self.flush_now()
        with self._thread_lock:
            if self._fd is None:
                return
            if self.error is not None:  # best effort: the disk may have room again
                note = {"type": "write_failed", "t": round(time.time(), 3)}
                with contextlib.suppress(OSError):
                    note_line = encode_record({**note, "error": self.error.message})
                    _write_all(self._fd, _utf8("\n" + note_line))
            os.close(self._fd)  # releases the session's lock
            self._fd = None


def _utf8(text: str) -> bytes:
    """``text`` as UTF-8; a lone surrogate that slipped past the edges (``app.text``) is
    written as U+FFFD rather than failing the write, so the file stays valid UTF-8."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return clean_text(text).encode("utf-8")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
