"""What an endpoint refused, what it honours, and how it counts tokens, remembered across
processes in a JSON file (docs/local-models.md).

Writes are atomic, under a ``flock``, after re-reading the file (concurrent processes keep
each other's entries); an unusable file is logged once and the memory keeps to this process.
``refused`` costs one ``stat``; ``remember`` and ``forget`` lock and fsync (``to_thread``).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from app.logger import logger

#: The features a server can be remembered to refuse. ``constrained``: it honours no
#: structured-output field; ``native_calls``: its native tool calls kept failing their schemas,
#: or it left the tools out of the prompt; ``system``: its chat template leaves system
#: messages out.
FEATURES = frozenset(
    {"stream_tools", "tools", "images", "stream", "constrained", "native_calls", "system"}
)
#: What a server can be remembered to honour, and the values each may take (``constrained``:
#: the request field that made its answers match a schema).
CHOICES: dict[str, frozenset[str]] = {
    "constrained": frozenset({"json_schema", "json_object", "guided_json", "strict"}),
}
#: Seconds a learned refusal is trusted (a server may be upgraded meanwhile).
DEFAULT_TTL = 7 * 24 * 3600.0
_VERSION = 1
_MAX_FILE_BYTES = 1 << 20  # a bigger file is not ours to parse
_MAX_ENTRIES = 500  # oldest entries beyond this are dropped on write
_FUTURE_SLACK = 24 * 3600.0  # timestamps further ahead than this are treated as invalid
#: Bounds of a believable count ratio (server tokens per token we count); outside: ignored.
MIN_RATIO, MAX_RATIO = 0.2, 5.0

_Entries = dict[str, dict[str, Any]]


@dataclass(frozen=True, slots=True)
class CountFacts:
    """How an endpoint counts: ``ratio`` = its prompt tokens per token we count (None: not
    learned), ``accepted`` = the largest prompt (its tokens) it answered (0: none yet)."""

    ratio: float | None = None
    accepted: int = 0


def _ratio(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        if MIN_RATIO <= value <= MAX_RATIO:
            return float(value)
    return None


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def default_cache_path() -> Path:
    """Where the memory lives unless a path is given (see the module docstring)."""
    root = os.environ.get("OPENMANUS_CACHE_DIR")
    if root:
        return Path(root).expanduser() / "endpoints.json"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "openmanus" / "endpoints.json"


def normalize_base_url(base_url: str) -> str:
    """``HTTP://User:pw@Host:8080/v1/`` -> ``http://host:8080/v1``: one key per endpoint, and
    no credentials, query or fragment ever reach the file."""
    text = (base_url or "").strip()
    try:
        parts = urlsplit(text)
        host = (parts.hostname or "").lower()
        if ":" in host:  # IPv6 literal
            host = f"[{host}]"
        port = parts.port
    except ValueError:
        return text.rstrip("/").lower()
    netloc = f"{host}:{port}" if port is not None else host
    return urlunsplit((parts.scheme.lower(), netloc, parts.path.rstrip("/"), "", ""))


def _key(base_url: str, model: str) -> str:
    return f"{normalize_base_url(base_url)} {model.strip()}"


class EndpointMemory:
    """Features each (base URL, model) refused, what it honours (:data:`CHOICES`) and how it
    counts tokens (:class:`CountFacts`), shared by every process of this user."""

    def __init__(
        self,
        path: Path | None = None,
        *,
        ttl: float = DEFAULT_TTL,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = Path(path) if path is not None else default_cache_path()
        self._ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: _Entries = {}
        self._stamp: tuple[int, int, int] | None = None
        self._local_only = False  # set once the file proved unusable
        self._warned: set[str] = set()

    @property
    def persistent(self) -> bool:
        """False once the file proved unusable and the memory keeps to this process."""
        return not self._local_only

    def __repr__(self) -> str:
        return f"EndpointMemory({str(self.path)!r}, persistent={self.persistent})"

    def refused(self, base_url: str, model: str) -> frozenset[str]:
        """The features this endpoint refused within the TTL (cheap: no read unless changed)."""
        with self._lock:
            self._refresh()
            entry = self._entries.get(_key(base_url, model))
            if not entry:
                return frozenset()
            now = self._clock()
            return frozenset(f for f, at in entry["features"].items() if self._fresh(at, now))

    def choices(self, base_url: str, model: str) -> dict[str, str]:
        """What the endpoint was found to honour within the TTL (``{"constrained": ...}``)."""
        with self._lock:
            self._refresh()
            entry = self._entries.get(_key(base_url, model))
            if not entry:
                return {}
            now = self._clock()
            return {
                key: chosen["value"]
                for key, chosen in entry.get("choices", {}).items()
                if self._fresh(chosen["at"], now)
            }

    def remember_choice(self, base_url: str, model: str, key: str, value: str | None) -> None:
        """Record what the endpoint honours for ``key`` (a :data:`CHOICES` key and one of its
        values); None forgets it."""
        if key not in CHOICES or (value is not None and value not in CHOICES[key]):
            raise ValueError(f"Unknown endpoint choice {key}={value!r}")
        entry_key, now = _key(base_url, model), self._clock()

        def change(entries: _Entries) -> None:
            entry = entries.setdefault(
                entry_key,
                {"base_url": normalize_base_url(base_url), "model": model.strip(), "features": {}},
            )
            choices = entry.setdefault("choices", {})
            if value is None:
                choices.pop(key, None)
            else:
                choices[key] = {"value": value, "at": now}

        self._update(change)

    def counts(self, base_url: str, model: str) -> CountFacts | None:
        """How the endpoint counted tokens, learned within the TTL; None when nothing is."""
        with self._lock:
            self._refresh()
            entry = self._entries.get(_key(base_url, model))
            counts = entry.get("counts") if entry else None
            if not counts or not self._fresh(counts["at"], self._clock()):
                return None
            return CountFacts(_ratio(counts.get("ratio")), _count(counts.get("accepted")))

    def remember_counts(
        self, base_url: str, model: str, *, ratio: float | None = None, accepted: int = 0
    ) -> None:
        """Record the endpoint's count ratio and the largest prompt it accepted (``accepted``
        0: forget it, the server changed); a ratio of None keeps the old one."""
        key, now = _key(base_url, model), self._clock()
        ratio = _ratio(ratio)

        def change(entries: _Entries) -> None:
            entry = entries.setdefault(
                key,
                {"base_url": normalize_base_url(base_url), "model": model.strip(), "features": {}},
            )
            old = entry.get("counts") or {}
            counts: dict[str, Any] = {"at": now}
            if (kept := ratio if ratio is not None else _ratio(old.get("ratio"))) is not None:
                counts["ratio"] = kept
            if _count(accepted):
                counts["accepted"] = accepted
            entry["counts"] = counts

        self._update(change)

    def remember(self, base_url: str, model: str, feature: str) -> None:
        """Record that the endpoint refused ``feature`` (one of :data:`FEATURES`)."""
        if feature not in FEATURES:
            raise ValueError(
                f"Unknown endpoint feature {feature!r}; expected one of {sorted(FEATURES)}"
            )
        key, now = _key(base_url, model), self._clock()

        def change(entries: _Entries) -> None:
            entry = entries.setdefault(
                key,
                {"base_url": normalize_base_url(base_url), "model": model.strip(), "features": {}},
            )
            entry["features"][feature] = now

        self._update(change)

    def forget(self, base_url: str, model: str) -> None:
        """Drop everything learned about this endpoint (e.g. after a server upgrade)."""
        key = _key(base_url, model)
        self._update(lambda entries: entries.pop(key, None))

    def clear(self) -> None:
        """Forget every endpoint."""
        self._update(lambda entries: entries.clear())

    def _fresh(self, learned_at: float, now: float) -> bool:
        return now - self._ttl < learned_at <= now + _FUTURE_SLACK

    def _warn_once(self, kind: str, message: str) -> None:
        if kind not in self._warned:
            self._warned.add(kind)
            logger.warning(
                f"Endpoint capability cache {self.path}: {message}; keeping it in memory"
            )

    def _refresh(self) -> None:
        """Reload the file when it changed since the last look (called with the lock held)."""
        if self._local_only:
            return
        try:
            st = os.stat(self.path, follow_symlinks=False)
        except FileNotFoundError:
            self._entries, self._stamp = {}, None
            return
        except OSError as e:
            self._go_local("unreadable", f"cannot stat it ({e})")
            return
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        if stamp == self._stamp:
            return
        loaded = self._read()
        if loaded is not None:
            self._entries, self._stamp = loaded, stamp

    def _read(self) -> _Entries | None:
        """The file's valid entries; {} when absent or corrupt; None when it cannot be used."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            return {}
        except OSError as e:
            reason = "it is a symlink" if os.path.islink(self.path) else f"cannot read it ({e})"
            self._go_local("unreadable", reason)
            return None
        try:
            with os.fdopen(fd, "rb") as f:
                if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                    self._go_local("unreadable", "it is not a regular file")
                    return None
                raw = f.read(_MAX_FILE_BYTES + 1)
        except OSError as e:
            self._go_local("unreadable", f"cannot read it ({e})")
            return None
        if len(raw) > _MAX_FILE_BYTES:
            self._warn_once("corrupt", "the file is too large; ignoring its content")
            return {}
        return self._parse(raw)

    def _parse(self, raw: bytes) -> _Entries:
        try:
            data = json.loads(raw.decode("utf-8")) if raw.strip() else {}
        except (ValueError, UnicodeDecodeError, RecursionError):
            self._warn_once("corrupt", "the file is not valid JSON; ignoring its content")
            return {}
        endpoints = data.get("endpoints") if isinstance(data, dict) else None
        if not isinstance(endpoints, dict):
            return {}
        now = self._clock()
        entries: _Entries = {}
        for key, entry in endpoints.items():
            if not isinstance(entry, dict) or not isinstance(entry.get("features", {}), dict):
                continue
            features = {
                f: float(at)
                for f, at in entry.get("features", {}).items()
                if f in FEATURES and self._valid_time(at, now)
            }
            counts = self._parse_counts(entry.get("counts"), now)
            choices = self._parse_choices(entry.get("choices"), now)
            if features or counts or choices:
                entries[str(key)] = {
                    "base_url": str(entry.get("base_url", "")),
                    "model": str(entry.get("model", "")),
                    "features": features,
                    **({"counts": counts} if counts else {}),
                    **({"choices": choices} if choices else {}),
                }
        return entries

    def _valid_time(self, at: Any, now: float) -> bool:
        return isinstance(at, int | float) and not isinstance(at, bool) and self._fresh(at, now)

    def _parse_counts(self, counts: Any, now: float) -> dict[str, Any] | None:
        """The valid, fresh part of an entry's ``counts``; None when nothing is."""
        if not isinstance(counts, dict) or not self._valid_time(counts.get("at"), now):
            return None
        parsed: dict[str, Any] = {"at": float(counts["at"])}
        if (ratio := _ratio(counts.get("ratio"))) is not None:
            parsed["ratio"] = ratio
        if accepted := _count(counts.get("accepted")):
            parsed["accepted"] = accepted
        return parsed if len(parsed) > 1 else None

    def _parse_choices(self, choices: Any, now: float) -> dict[str, Any]:
        """The valid, fresh part of an entry's ``choices``."""
        if not isinstance(choices, dict):
            return {}
        return {
            key: {"value": chosen["value"], "at": float(chosen["at"])}
            for key, chosen in choices.items()
            if key in CHOICES
            and isinstance(chosen, dict)
            and chosen.get("value") in CHOICES[key]
            and self._valid_time(chosen.get("at"), now)
        }

    def _go_local(self, kind: str, message: str) -> None:
        self._warn_once(kind, message)
        self._local_only = True

    def _update(self, change: Callable[[_Entries], Any]) -> None:
        """Apply ``change`` to the file's current content under the lock file, and to memory."""
        with self._lock:
            if not self._local_only:
                try:
                    self._update_file(change)
                    return
                except OSError as e:
                    self._go_local("unwritable", f"cannot write it ({e})")
            change(self._entries)

    def _update_file(self, change: Callable[[_Entries], Any]) -> None:
        directory = self.path.parent
        if not directory.exists():
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        with self._file_lock():
            if os.path.islink(self.path):
                raise OSError("the cache file is a symlink")
            current = self._read()
            if current is None:  # _read went local already; keep what we knew
                raise OSError("the cache file cannot be read")
            change(current)
            self._write(self._pruned(current))
            st = os.stat(self.path, follow_symlinks=False)
            self._entries = current
            self._stamp = (st.st_mtime_ns, st.st_size, st.st_ino)

    @contextlib.contextmanager
    def _file_lock(self) -> Iterator[None]:
        """An exclusive ``flock`` on ``<file>.lock`` across processes (released on close)."""
        lock_path = self.path.with_name(self.path.name + ".lock")
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _pruned(self, entries: _Entries) -> _Entries:
        now = self._clock()
        for entry in entries.values():
            entry["features"] = {
                f: at for f, at in entry["features"].items() if self._fresh(at, now)
            }
            if "counts" in entry and not self._fresh(entry["counts"]["at"], now):
                del entry["counts"]
            choices = {
                k: c for k, c in entry.get("choices", {}).items() if self._fresh(c["at"], now)
            }
            if choices:
                entry["choices"] = choices
            else:
                entry.pop("choices", None)
        live = {
            k: e for k, e in entries.items() if e["features"] or "counts" in e or "choices" in e
        }

        def learned_at(entry: dict[str, Any]) -> float:
            times = [c["at"] for c in entry.get("choices", {}).values()]
            return max(
                [*entry["features"].values(), *times, entry.get("counts", {}).get("at", 0.0)]
            )

        if len(live) > _MAX_ENTRIES:
            newest = sorted(live, key=lambda k: learned_at(live[k]), reverse=True)
            live = {k: live[k] for k in newest[:_MAX_ENTRIES]}
        entries.clear()
        entries.update(live)
        return entries

    def _write(self, entries: _Entries) -> None:
        payload = json.dumps({"version": _VERSION, "endpoints": entries}, indent=1, sort_keys=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".endpoints.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(payload)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, 0o600)
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        with contextlib.suppress(OSError):  # make the rename itself durable (best effort)
            dir_fd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)


class EndpointMemories:
    """One memory per cache file, shared by every ``LLM`` of the process using that file."""

    def __init__(self) -> None:
        self._by_path: dict[Path, EndpointMemory] = {}
        self._lock = threading.Lock()

    def at(self, path: Path | None = None) -> EndpointMemory:
        """The memory at ``path`` (default: :func:`default_cache_path`, read now)."""
        path = path or default_cache_path()
        with self._lock:
            memory = self._by_path.get(path)
            if memory is None:
                memory = self._by_path[path] = EndpointMemory(path)
            return memory


#: The process's memories (``LLM.registry`` hands them to every endpoint).
PROCESS_MEMORIES = EndpointMemories()


def default_memory() -> EndpointMemory:
    """The process's memory at :func:`default_cache_path`."""
    return PROCESS_MEMORIES.at()
