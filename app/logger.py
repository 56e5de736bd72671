"""Logging on loguru with secrets redacted from messages and formatted text (tracebacks too);
silent until the application calls ``define_log_level``, loguru imported on first need."""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import os
import re
import sys
import threading
import urllib.parse
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from loguru import Logger, Record

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
#: Built from the registered forms when first needed after a registration (None: not yet).
_secrets_pattern: re.Pattern[str] | None = None


def _redact_assignment(match: re.Match[str]) -> str:
    """``api_key=value``: the value goes; a ``${VAR}`` reference, or one lowercase word after a
    bare ``name: `` ("api_key: environment variable ... is not set"), is prose and stays."""
    name, separator, value = match.groups()
    if value.startswith("${"):
        return match.group(0)
    bare_colon = ":" in separator and not ({'"', "'"} & set(separator))
    if bare_colon and separator.endswith((" ", "\t")) and value.isalpha() and value.islower():
        return match.group(0)
    return f"{name}{separator}{REDACTED}"


@functools.cache
def _key_patterns() -> tuple[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]], ...]:
    """Patterns for credentials nobody registered (keys pasted into prompts, SDK error
    messages); compiled when first needed, not at import."""
    return (
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
                (\$\{[^}\s]*\}?|[^\s"',;&}\]\)]+)
                """
            ),
            _redact_assignment,
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
        _secrets_pattern = None  # rebuilt by the next redaction


def _registered_pattern() -> re.Pattern[str] | None:
    """One pattern matching every registered form (None: nothing registered)."""
    global _secrets_pattern
    pattern = _secrets_pattern
    if pattern is not None or not _secrets_forms:
        return pattern
    with _secrets_lock:
        if _secrets_pattern is None and _secrets_forms:
            # Longest first so a secret containing another one is replaced whole.
            ordered = sorted(_secrets_forms, key=len, reverse=True)
            _secrets_pattern = re.compile("|".join(re.escape(s) for s in ordered))
        return _secrets_pattern


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
    """A secret raw, escaped (JSON, repr, URL; twice over) and in base64 at any alignment."""
    forms = {value} | _escaped(value)
    for form in list(forms):
        forms |= _escaped(form)  # a JSON string inside a JSON string, a repr of JSON...
    forms |= _base64_forms(value.encode("utf-8", "surrogatepass"))
    return {f for f in forms if f}


def redact(text: str) -> str:
    """Replace registered secrets and anything shaped like a credential with ``***``."""
    if not text:
        return text
    pattern = _registered_pattern()
    if pattern is not None:
        text = pattern.sub(REDACTED, text)
    for regex, replacement in _key_patterns():
        text = regex.sub(replacement, text)
    return text


def redact_registered(text: str) -> str:
    """Replace only the registered secret values: for text the model reads, where a pattern
    such as ``password=...`` is often legitimate code and must stay visible."""
    if not text:
        return text
    pattern = _registered_pattern()
    return text if pattern is None else pattern.sub(REDACTED, text)


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


#: loguru's built-in levels (``logger.level(name).no``), known without importing loguru.
_LEVEL_NUMBERS = dict(TRACE=5, DEBUG=10, INFO=20, SUCCESS=25, WARNING=30, ERROR=40, CRITICAL=50)
#: The level each logging method logs at (``exception`` logs at ERROR).
_METHOD_LEVELS = {name.lower(): no for name, no in _LEVEL_NUMBERS.items()} | {"exception": 40}
_NOTHING = 1 << 30  # the lowest level taken when no sink is configured


class _Loader:
    """loguru once loaded; before that, ``pending``: the last :func:`define_log_level` (applied
    on load, as if when asked), and ``floor``: the lowest level it lets through."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.real: Logger | None = None
        self.pending: Callable[[], None] | None = None
        self.floor = 0

    def decides(self) -> bool:
        """Whether ``pending`` alone says what is kept: nobody loaded loguru (and added sinks)."""
        return self.real is None and self.pending is not None and "loguru" not in sys.modules

    def dropped(self, level_no: int) -> bool:
        return level_no < self.floor and self.decides()

    def load(self) -> Logger:
        """The redacting loguru logger, any pending configuration applied first."""
        real = self.real
        if real is not None:
            return real
        with self.lock:
            if self.real is None:
                from loguru import logger as base  # on first need: see the module docstring

                pending, self.pending = self.pending, None
                if pending is not None:
                    pending()
                else:
                    _quiet_default_handler()
                real = base.patch(_redact_record)
                # Later calls go straight to loguru's methods, which then name the caller's
                # frame in the record, not this module's.
                proxy_vars = vars(logger)
                for name in (*_METHOD_LEVELS, "log"):
                    proxy_vars[name] = getattr(real, name)
                self.real = real
            return self.real


_loader = _Loader()

#: Our package: its records stay off loguru's default handler (``app`` and ``app.*``).
_PACKAGE = __name__.partition(".")[0]


def _not_ours(record: Record) -> bool:
    name = record["name"] or ""
    return name != _PACKAGE and not name.startswith(_PACKAGE + ".")


def _quiet_default_handler() -> None:
    """Swap loguru's import-time stderr handler (id 0) for one taking every record but ours:
    the library prints nothing, an application's own loguru records still show."""
    from loguru import logger as base  # on first need: see the module docstring

    try:
        base.remove(0)
    except ValueError:  # already removed: whoever did it configured loguru as they wish
        return
    base.add(sys.stderr, filter=_not_ours)


def _level_method(name: str) -> Callable[..., None]:
    level_no = _METHOD_LEVELS[name]

    def method(self: _LazyLogger, message: Any, /, *args: Any, **kwargs: Any) -> None:
        if _loader.dropped(level_no):
            return
        # The first record that may be kept: loguru is loaded, and this one call is logged
        # one frame up so it names our caller, as every later call does by itself.
        getattr(_loader.load().opt(depth=1), name)(message, *args, **kwargs)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"Log ``message`` at {name.upper()} (see loguru's ``Logger.{name}``)."
    return method


class _LazyLogger:
    """Level methods drop records below the configured levels without importing loguru; any
    other attribute (``add``, ``opt``, ``bind``...) loads it and is loguru's."""

    def log(self, level: int | str, message: Any, /, *args: Any, **kwargs: Any) -> None:
        """Log at ``level`` (a number or a level's name), as loguru's ``Logger.log``."""
        number = level if isinstance(level, int) else _LEVEL_NUMBERS.get(level)
        if number is not None and _loader.dropped(number):
            return
        _loader.load().opt(depth=1).log(level, message, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(_loader.load(), name)

    def __repr__(self) -> str:
        return repr(_loader.real) if _loader.real is not None else "<logger (loguru not loaded)>"


for _name in _METHOD_LEVELS:
    setattr(_LazyLogger, _name, _level_method(_name))
logger: Logger = cast("Logger", _LazyLogger())


def log_enabled(level: str) -> bool:
    """Whether any sink takes records at ``level``: hot paths check before building a costly
    message (loguru drops it cheaply, but only after the f-string is built)."""
    number = _LEVEL_NUMBERS.get(level)
    if number is not None and _loader.decides():
        return number >= _loader.floor
    _loader.load()
    from loguru import logger as base  # on first need: see the module docstring

    try:
        # loguru has no public way to ask this; its stubs leave out the internal _core.
        core = base._core  # type: ignore[attr-defined]
        return bool(core.levels[level].no >= core.min_level)
    except (AttributeError, KeyError):  # another loguru layout: assume it is on
        return True


def _console_sink(message: str) -> None:
    """Writes redacted text to whatever ``sys.stderr`` is at write time (pytest swaps it)."""
    stream = sys.stderr
    if stream is not None:  # None: pythonw / detached processes
        stream.write(redact(str(message)))
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
    """Replace all handlers with a redacting console sink and a log file created on first
    record, ``<log_dir>/<name>_<stamp>.log``; a level ``"OFF"``/``None`` drops its sink."""
    console_level = _sink_level(print_level)
    file_level = _sink_level(logfile_level)
    sinks: list[tuple[Any, str | int, str, bool]] = []
    if console_level is not None:
        colorize = bool(getattr(sys.stderr, "isatty", lambda: False)())
        console_format = _COMPACT_CONSOLE_FORMAT if compact else _CONSOLE_FORMAT
        sinks.append((_console_sink, console_level, console_format, colorize))
    if file_level is not None:
        stamp = datetime.now().strftime("%Y%m%d%H%M%S")
        file_name = f"{name}_{stamp}.log" if name else f"{stamp}.log"
        default_dir = os.environ.get("OPENMANUS_LOG_DIR") or _PROJECT_ROOT / "logs"
        directory = Path(log_dir) if log_dir is not None else Path(default_dir)
        sinks.append((_LazyFileSink(directory / file_name), file_level, _FILE_FORMAT, False))

    def apply(*remove: int) -> None:
        from loguru import logger as base  # on first need: see the module docstring

        if remove:
            for handler_id in remove:
                with contextlib.suppress(ValueError):  # already removed by its owner
                    base.remove(handler_id)
        else:
            base.remove()
        for sink, level, fmt, colorize in sinks:
            base.add(
                sink, level=level, format=fmt, colorize=colorize, backtrace=False, diagnose=False
            )

    # Built-in levels' numbers; None when only loguru can tell (custom or invalid).
    numbers = [
        (level if level >= 0 else None) if isinstance(level, int) else _LEVEL_NUMBERS.get(level)
        for _, level, _, _ in sinks
    ]
    known = [n for n in numbers if n is not None]
    with _loader.lock:
        if _loader.real is None and "loguru" not in sys.modules and len(known) == len(numbers):
            # Applied when loguru is loaded. No handler exists before that but the one
            # loguru's import adds (id 0): that one is replaced, any added later are kept.
            _loader.pending = lambda: apply(0)
            _loader.floor = min(known, default=_NOTHING)
            return logger
        _loader.pending = None
    _loader.load()
    apply()  # an unknown level is refused here, by loguru, as when the call is eager
    return logger
