"""Logging on loguru, with secrets kept out of every line we write.

API keys travel through error messages (an SDK echoing a rejected key, a proxy URL with a
password), so redaction happens twice: a patcher cleans each record's message for any sink,
and the sinks added by :func:`define_log_level` clean the fully formatted text, tracebacks
included. Importing this module touches no handler; entry points call ``define_log_level``.
"""

from __future__ import annotations

import base64
import json
import os
import re
import sys
import threading
import urllib.parse
from datetime import datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING

from loguru import logger as _loguru_logger

if TYPE_CHECKING:
    from loguru import Logger, Record

__all__ = [
    "define_log_level",
    "log_enabled",
    "logger",
    "redact",
    "redact_registered",
    "register_secret",
    "registered_secrets",
    "secret_forms",
]

_PROJECT_ROOT = Path(__file__).resolve().parent.parent

#: Shorter values would redact ordinary words ("test", "1234"), so they are not registered.
MIN_SECRET_LENGTH = 6
REDACTED = "***"

_CONSOLE_FORMAT = (
    "<green>{time:YYYY-MM-DD HH:mm:ss.SSS}</green> | <level>{level: <8}</level> | "
    "<cyan>{name}</cyan>:<cyan>{function}</cyan>:<cyan>{line}</cyan> - <level>{message}</level>"
)
_COMPACT_CONSOLE_FORMAT = "<green>{time:HH:mm:ss}</green> <level>{level: <7}</level> {message}"
_FILE_FORMAT = "{time:YYYY-MM-DD HH:mm:ss.SSS} | {level: <8} | {name}:{function}:{line} - {message}"

_secrets: set[str] = set()
_secrets_forms: set[str] = set()
_secrets_lock = threading.Lock()
_secrets_pattern: re.Pattern[str] | None = None

# Patterns for credentials nobody registered (keys pasted into prompts, SDK error messages).
_KEY_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # OpenAI / Anthropic / DeepSeek style keys: sk-..., sk-proj-..., sk-ant-...
    (re.compile(r"\bsk-[A-Za-z0-9_\-]{16,}"), REDACTED),
    # Authorization headers.
    (re.compile(r"\b(Bearer)\s+[A-Za-z0-9._~+/\-]{6,}=*", re.IGNORECASE), r"\1 " + REDACTED),
    # key=value, key: value, "key": "value" for credential-like key names.
    (
        re.compile(
            r"""(?ix)
            \b((?:x-)?api[_-]?key|access[_-]?token|auth[_-]?token|client[_-]?secret
               |secret[_-]?key|password|passwd)
            (["']?\s*[:=]\s*["']?)
            ([^\s"',;&}\]\)]+)
            """
        ),
        r"\1\2" + REDACTED,
    ),
    # Credentials inside URLs: scheme://user:password@host
    (re.compile(r"(://[^/\s:@]+:)[^/\s@]+@"), r"\1" + REDACTED + "@"),
)


def register_secret(value: str | None) -> None:
    """Remember a value that must never appear in log output (API keys, passwords)."""
    global _secrets_pattern
    if not value or not isinstance(value, str):
        return
    value = value.strip()
    if len(value) < MIN_SECRET_LENGTH:
        return
    with _secrets_lock:
        if value in _secrets:
            return
        _secrets.add(value)
        _secrets_forms.update(f for f in secret_forms(value) if len(f) >= MIN_SECRET_LENGTH)
        # Longest first so a secret containing another one is replaced whole.
        ordered = sorted(_secrets_forms, key=len, reverse=True)
        _secrets_pattern = re.compile("|".join(re.escape(s) for s in ordered))


def _escaped(value: str) -> set[str]:
    """``value`` as it appears inside a JSON string, a Python repr and a URL."""
    forms = {
        json.dumps(value)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
        repr(value)[1:-1],
        ascii(value)[1:-1],
        repr(value.replace("'", '"'))[1:-1].replace('"', "'"),  # repr's other quoting
        urllib.parse.quote(value, safe=""),
        urllib.parse.quote_plus(value, safe=""),
        urllib.parse.quote(value),
    }
    if '"' in value or "'" in value:
        forms.add(repr(value + '"')[1:-2])  # repr chooses quotes by content: both ways
        forms.add(repr(value + "'")[1:-2])
    return forms


def _base64_forms(data: bytes) -> set[str]:
    """The part of the base64 (standard and URL-safe) of ``data`` that does not depend on
    what precedes it, for each of the three alignments it can have inside a longer blob."""
    forms: set[str] = set()
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + data).decode().rstrip("=")
        first = -(-8 * shift // 6)  # first character made of the secret's bits only
        last = (8 * (shift + len(data))) // 6  # one past the last such character
        part = encoded[first:last]
        forms.update({part, part.replace("+", "-").replace("/", "_")})
    return forms


def secret_forms(value: str) -> set[str]:
    """Every form of a secret the redactor looks for: raw, escaped (JSON, Python repr, URL,
    twice over for JSON in JSON) and base64 in any alignment."""
    forms = {value} | _escaped(value)
    for form in list(forms):
        forms |= _escaped(form)  # a JSON string inside a JSON string, a repr of JSON...
    forms |= _base64_forms(value.encode("utf-8", "surrogatepass"))
    return {f for f in forms if f}


def redact(text: str) -> str:
    """Replace registered secrets and anything shaped like a credential with ``***``."""
    if not text:
        return text
    pattern = _secrets_pattern
    if pattern is not None:
        text = pattern.sub(REDACTED, text)
    for regex, replacement in _KEY_PATTERNS:
        text = regex.sub(replacement, text)
    return text


def redact_registered(text: str) -> str:
    """Replace only the registered secret values: for text the model reads, where a pattern
    such as ``password=...`` is often legitimate code and must stay visible."""
    pattern = _secrets_pattern
    if not text or pattern is None:
        return text
    return pattern.sub(REDACTED, text)


def registered_secrets() -> frozenset[str]:
    """The registered secret values (to keep them out of child processes' environments)."""
    with _secrets_lock:
        return frozenset(_secrets)


def _redact_record(record: Record) -> None:
    """Patcher: clean the message (and string extras) before any sink sees the record."""
    record["message"] = redact(record["message"])
    extra = record["extra"]
    for key, value in extra.items():
        if isinstance(value, str):
            extra[key] = redact(value)


logger: Logger = _loguru_logger.patch(_redact_record)


def log_enabled(level: str) -> bool:
    """Whether any sink takes records at ``level``. loguru drops a record below every sink's
    level cheaply, but the message's f-string is built first; hot paths check this before
    building costly messages, so logging that is off costs nothing."""
    try:
        # loguru has no public way to ask this; its stubs leave out the internal _core.
        core = _loguru_logger._core  # type: ignore[attr-defined]
        return core.levels[level].no >= core.min_level
    except (AttributeError, KeyError):  # another loguru layout: assume it is on
        return True


class _ConsoleSink:
    """Writes redacted text to whatever ``sys.stderr`` is at write time (pytest swaps it)."""

    def write(self, message: str) -> None:
        stream = sys.stderr
        if stream is None:  # pythonw / detached processes
            return
        stream.write(redact(str(message)))

    def flush(self) -> None:
        stream = sys.stderr
        if stream is not None:
            stream.flush()


class _LazyFileSink:
    """A log file that only comes into existence when the first record is written."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: IO[str] | None = None

    def write(self, message: str) -> None:
        # loguru serialises calls per handler, so no extra lock is needed here.
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "a", encoding="utf-8")
        self._file.write(redact(str(message)))

    def flush(self) -> None:
        if self._file is not None:
            self._file.flush()

    def stop(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _sink_level(level: str | int | None) -> str | int | None:
    """The level a sink takes records at, or None when it is off (None, "OFF" or "")."""
    if not isinstance(level, str):
        return level
    name = level.strip().upper()
    return None if name in {"OFF", ""} else name


def define_log_level(
    print_level: str | int | None = "INFO",
    logfile_level: str | int | None = "DEBUG",
    name: str | None = None,
    *,
    log_dir: Path | None = None,
    compact: bool = False,
) -> Logger:
    """Replace all handlers with a redacting console sink and a lazily created log file.

    Either level may be ``"OFF"``/``None`` to drop that sink. The file is
    ``<log_dir>/<name>_<YYYYmmddHHMMSS>.log`` (default directory ``$OPENMANUS_LOG_DIR``, else
    ``<project>/logs``).
    ``compact`` gives a short console line (time, level, message) for terminal programs.
    """
    _loguru_logger.remove()
    console_level = _sink_level(print_level)
    file_level = _sink_level(logfile_level)
    if console_level is not None:
        colorize = bool(getattr(sys.stderr, "isatty", lambda: False)())
        _loguru_logger.add(
            _ConsoleSink(),
            level=console_level,
            format=_COMPACT_CONSOLE_FORMAT if compact else _CONSOLE_FORMAT,
            colorize=colorize,
            backtrace=False,
            diagnose=False,
        )
    if file_level is not None:
        stamp = datetime.now().strftime("%Y%m%d%H%M%S")
        file_name = f"{name}_{stamp}.log" if name else f"{stamp}.log"
        default_dir = os.environ.get("OPENMANUS_LOG_DIR") or _PROJECT_ROOT / "logs"
        directory = Path(log_dir) if log_dir is not None else Path(default_dir)
        _loguru_logger.add(
            _LazyFileSink(directory / file_name),
            level=file_level,
            format=_FILE_FORMAT,
            colorize=False,
            backtrace=False,
            diagnose=False,
        )
    return logger
