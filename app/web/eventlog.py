"""Each web session's numbered event log: what the page (and AG-UI clients) are sent.

Entries are JSON-able dicts numbered from 1; a reader asks for everything after the last number
it saw (SSE ``Last-Event-ID``), so a page that reconnects misses nothing. Every entry is redacted
as it is appended (:mod:`app.redaction`, the one outward redactor): the page and AG-UI clients
never receive a configured secret, in any encoding, or anything shaped like a credential.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import time
from typing import Any

from app import redaction
from app.events import Event, PlanChanged

#: Oldest entries are dropped past this many (a page then starts at the oldest kept).
MAX_ENTRIES = 50_000
#: Longest string sent in one entry (tool outputs are already capped by the agent).
MAX_STRING = 200_000


def redact_tree(value: Any) -> Any:
    """``value`` redacted for the page (:func:`app.redaction.redact_tree`), long strings cut."""
    return redaction.redact_tree(value, MAX_STRING)


def render_event(event: Event, plan: dict[str, Any] | None = None) -> dict[str, Any]:
    """An agent or flow event as a log entry (``plan``: the flow's plan, for plan events);
    redacted when appended."""
    data = event.to_json()
    if isinstance(event, PlanChanged) and plan is not None:
        lists = {key: list(plan.get(key, [])) for key in ("steps", "step_statuses", "step_notes")}
        data["plan"] = {"title": plan.get("title", ""), **lists}
    return data


def decode_image(image: str | None) -> bytes | None:
    """A screenshot (a tool's, or the browser state's) as bytes; None when absent or not
    base64."""
    if not image:
        return None
    with contextlib.suppress(binascii.Error, ValueError):
        return base64.b64decode(image, validate=False)
    return None


class EventLog:
    """Append-only, numbered entries with waiters; lives on one event loop."""

    def __init__(self, limit: int = MAX_ENTRIES) -> None:
        self.limit = limit
        self.entries: list[dict[str, Any]] = []
        self._next = 1
        self._changed = asyncio.Event()
        self.closed = False

    @property
    def last_id(self) -> int:
        return self._next - 1

    def append(self, entry: dict[str, Any]) -> dict[str, Any]:
        """Keep ``entry`` redacted and numbered, wake the readers; returns what was kept."""
        entry = redact_tree(entry)
        entry["id"] = self._next
        entry.setdefault("t", round(time.time(), 3))
        self._next += 1
        self.entries.append(entry)
        if len(self.entries) > self.limit:
            del self.entries[: len(self.entries) - self.limit]
        self._wake()
        return entry

    def close(self) -> None:
        """No more entries will come (the server is shutting down)."""
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def since(self, last_id: int) -> list[dict[str, Any]]:
        """Entries numbered after ``last_id``, oldest first."""
        if not self.entries or last_id >= self.last_id:
            return []
        first = self.entries[0]["id"]
        return self.entries[max(0, last_id + 1 - first) :]

    async def wait(self, last_id: int, timeout: float) -> bool:
        """Wait until an entry after ``last_id`` exists (True) or ``timeout`` passes."""
        if last_id < self.last_id or self.closed:
            return True
        try:
            await asyncio.wait_for(self._changed.wait(), timeout)
        except TimeoutError:
            return False
        return True
