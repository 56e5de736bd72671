"""What the terminal programs share before the framework is loaded: exit codes and output.
Answers go to stdout, everything else to stderr; a closed stdout (``| head -1``) is quiet;
both are redacted (:mod:`app.redaction`, light to import).
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any

from app.redaction import redact_text

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_CONFIG = 2
EXIT_SESSION_BUSY = 3  # --resume of a session another process is running
EXIT_SESSION_WRITE = 4  # the session file could not be written (disk full...)
EXIT_INTERRUPTED = 130
EXIT_WORDS = frozenset({"exit", "quit"})
#: Where ``run_mcp.py --connection sse|http`` finds a running server without ``--server-url``.
DEFAULT_URLS = {"sse": "http://127.0.0.1:8000/sse", "http": "http://127.0.0.1:8000/mcp"}


def exit_code_for(stop_reason: Any) -> int:
    """0 for a run that completed (``stop_reason``, a ``StopReason``); 1 for every failure."""
    return EXIT_OK if str(stop_reason) == "completed" else EXIT_FAILED


def say(message: str) -> None:
    """A line for the user on stderr (stdout is kept for answers), redacted."""
    print(redact_text(message), file=sys.stderr, flush=True)


def answer(text: str) -> None:
    """A task's answer on stdout, redacted. It is the model's text: a lone surrogate in it
    (which has no UTF-8 encoding) is printed as U+FFFD, and a character the terminal's
    encoding lacks as ``?``, rather than failing the run at its very end."""
    text = redact_text(text)
    try:
        try:
            print(text, flush=True)
        except UnicodeEncodeError:
            encoding = sys.stdout.encoding or "utf-8"
            print(text.encode(encoding, "replace").decode(encoding), flush=True)
    except BrokenPipeError:  # `main.py -p ... | head -1`: whoever reads has stopped reading
        silence_stdout()


def silence_stdout() -> None:
    """After the reader of stdout went away (a closed pipe): send the rest, and Python's own
    flush at exit, to /dev/null, so no ``BrokenPipeError`` traceback follows."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def stdin_is_tty() -> bool:
    try:
        return os.isatty(sys.stdin.fileno())
    except (AttributeError, OSError, ValueError):
        return False
