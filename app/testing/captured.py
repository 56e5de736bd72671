"""One request as the scripted server saw it: what tests assert on after driving an agent."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CapturedRequest"]


@dataclass(frozen=True)
class CapturedRequest:
    """One request as the server saw it (every route, in arrival order).

    ``raw`` is the request body exactly as received; ``body`` is its JSON (``None`` when it is
    empty or not JSON). ``route`` is ``"chat"``, ``"models"`` or ``"unknown"``.
    """

    index: int
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any
    raw: bytes
    route: str = "unknown"
    received_at: float = field(default_factory=time.time)

    @property
    def messages(self) -> list[Any]:
        """The request's ``messages`` (empty when absent)."""
        value = self.body.get("messages") if isinstance(self.body, dict) else None
        return value if isinstance(value, list) else []

    @property
    def tools(self) -> list[Any] | None:
        """The request's ``tools``; ``None`` when the key was not sent at all."""
        return self.body.get("tools") if isinstance(self.body, dict) else None

    @property
    def model(self) -> str | None:
        return self.body.get("model") if isinstance(self.body, dict) else None

    @property
    def stream(self) -> bool:
        return isinstance(self.body, dict) and self.body.get("stream") is True

    def to_json(self) -> dict[str, Any]:
        """A JSON-able record (what the CLI's ``--log`` writes, one per line)."""
        return {
            "index": self.index,
            "method": self.method,
            "path": self.path,
            "query": self.query,
            "headers": self.headers,
            "body": self.body if self.body is not None else self.raw.decode("utf-8", "replace"),
            "route": self.route,
        }
