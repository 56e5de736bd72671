"""INTERIM stand-in for helper texttools' module (same interface); replaced on merge."""

from __future__ import annotations

import json
import os
import tempfile
import threading
from pathlib import Path

__all__ = ["EndpointMemory", "default_memory"]


class EndpointMemory:
    def __init__(self, path: Path | None = None) -> None:
        if path is None:
            root = os.environ.get("OPENMANUS_CACHE_DIR")
            path = (Path(root) if root else Path.home() / ".cache" / "openmanus") / \
                "endpoints.json"
        self.path = Path(path)
        self._lock = threading.Lock()

    def _read(self) -> dict[str, list[str]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def refused(self, base_url: str, model: str) -> frozenset[str]:
        value = self._read().get(f"{base_url}|{model}")
        return frozenset(v for v in value if isinstance(v, str)) if isinstance(value, list) \
            else frozenset()

    def remember(self, base_url: str, model: str, feature: str) -> None:
        with self._lock:
            data = self._read()
            key = f"{base_url}|{model}"
            data[key] = sorted(set(self.refused(base_url, model)) | {feature})
            self._write(data)

    def forget(self, base_url: str, model: str) -> None:
        with self._lock:
            data = self._read()
            data.pop(f"{base_url}|{model}", None)
            self._write(data)

    def _write(self, data: dict[str, list[str]]) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(data, handle)
            os.replace(tmp, self.path)
        except OSError:
            pass


def default_memory() -> EndpointMemory:
    return EndpointMemory()
