"""Start a program with resource limits and default signal handling, without a shell.

A tiny Python stub (``python -I -S -c``) sets the rlimits, resets signal dispositions (an
agent started in the background ignores SIGINT, and ignored signals survive ``exec``), then
``exec``s the real program. Used for every command a backend starts.
"""

from __future__ import annotations

import json
import sys

__all__ = ["launcher_argv"]

_LAUNCHER = r"""
import json, os, signal, sys
try:
    import resource
except ImportError:
    resource = None
limits = json.loads(sys.argv[1])
if resource is not None:
    for name, value in limits.items():
        which = getattr(resource, name, None)
        if which is None:
            continue
        try:
            _, hard = resource.getrlimit(which)
            new_hard = value + 1 if name == "RLIMIT_CPU" else value
            if hard != resource.RLIM_INFINITY:
                new_hard = min(new_hard, hard)
            resource.setrlimit(which, (min(value, new_hard), new_hard))
        except (OSError, ValueError):
            pass
for name in ("SIGINT", "SIGQUIT", "SIGTERM", "SIGHUP", "SIGPIPE", "SIGXFSZ", "SIGTSTP",
             "SIGTTIN", "SIGTTOU"):
    if hasattr(signal, name):
        signal.signal(getattr(signal, name), signal.SIG_DFL)
signal.pthread_sigmask(signal.SIG_SETMASK, ())
try:
    os.execvp(sys.argv[2], sys.argv[2:])
except OSError as exc:
    sys.stderr.write(f"cannot run {sys.argv[2]}: {exc.strerror or exc}\n")
    os._exit(127)
"""


def launcher_argv(argv: list[str], rlimits: dict[str, int] | None = None) -> list[str]:
    """``argv`` prefixed with the stub that applies ``rlimits`` (``RLIMIT_*`` name -> value)."""
    python = sys.executable or "python3"
    return [python, "-I", "-S", "-c", _LAUNCHER, json.dumps(rlimits or {}), *argv]
