"""Appending records to a session file: one JSON object per line, secrets replaced.

Records are buffered as they come and written (and flushed to the OS) at each checkpoint, in
a worker thread so the event loop never waits on the disk. A process killed at any moment
leaves whole lines plus, at worst, one cut-off last line, which the reader reports and skips.
"""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import IO, Any

from app.logger import logger, redact_registered

__all__ = ["SessionWriter", "encode_record"]


def encode_record(record: dict[str, Any]) -> str:
    """One line of JSON with every registered secret (API keys...) replaced by ``***``."""
    text = json.dumps(record, ensure_ascii=False, default=str, separators=(",", ":"))
    return redact_registered(text) + "\n"


class SessionWriter:
    """Owns one session file; ``add`` buffers, ``flush`` writes."""

    def __init__(self, path: Path, *, new: bool = True) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[str] | None = path.open("x" if new else "a", encoding="utf-8")
        self._pending: list[str] = []
        self._thread_lock = threading.Lock()
        self._flush_lock: asyncio.Lock | None = None
        self.failed = False

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
            if self._file is None:
                return
            try:
                self._file.write(text)
                self._file.flush()
            except OSError as e:
                if not self.failed:
                    logger.warning(f"Cannot write the session file {self.path}: {e}")
                self.failed = True

    def close(self) -> None:
        self.flush_now()
        with self._thread_lock:
            if self._file is not None:
                self._file.close()
                self._file = None
