"""How this project starts its own Python programs on the host, next to files the model writes
(the docker relay, the launch stub, the reaper, our MCP server over stdio, Ray's workers): an
isolated interpreter, ``python -I`` (neither the working directory, the script's directory,
``PYTHONPATH`` nor the user's site directory is on ``sys.path``, so a planted ``app/`` or
``sitecustomize.py`` is never imported), started in a working directory that is no
workspace. Their code comes from the installed package only: ``-I`` keeps ``site-packages``
and its ``.pth`` files, so a regular install and an editable one (whose finder a ``.pth``
file installs) both resolve ``app`` to the real package (docs/sandbox.md)."""

from __future__ import annotations

import atexit
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from typing import Any

from app.logger import logger
from app.sandbox import reaper

#: The working directory of our own programs: exists everywhere, and no workspace.
HOST_CWD = "/"

#: The interpreter's option that isolates it (``-I`` = ``-E -P -s``).
ISOLATED = "-I"


def python() -> str:
    """The interpreter running this program, its directory resolved (``co/../venv/bin`` and
    linked directories), its name kept: a venv's ``bin/python`` links to the base interpreter,
    and only the venv's path makes it that venv's. Our own programs run with the same one."""
    executable = sys.executable
    if not executable:
        return "python3"
    directory, name = os.path.split(os.path.abspath(executable))
    return os.path.join(os.path.realpath(directory), name)


def python_argv(*args: str) -> list[str]:
    """``python -I args...``: our own Python program, isolated."""
    return [python(), ISOLATED, *args]


def module_argv(module: str, *args: str) -> list[str]:
    """``python -I -m module args...``: ``module`` from the installed package."""
    return python_argv("-m", module, *args)


def isolate_args(args: list[str]) -> list[str]:
    """An interpreter's arguments (the program is given apart, MCP's ``command``/``args``)
    with ``-I`` first, unless they already have it."""
    return args if ISOLATED in args[:1] else [ISOLATED, *args]


@functools.cache
def _empty_working_dir() -> str:
    path = tempfile.mkdtemp(prefix="openmanus-ray-")
    atexit.register(shutil.rmtree, path, True)
    return path


def ray_runtime_env(runtime_env: Mapping[str, Any] | None) -> dict[str, Any]:
    """``runtime_env`` for ``ray.init``: Ray puts the driver's working directory (and script
    directory) in front of its workers' ``sys.path`` and runs them there, unless the job has
    a ``working_dir`` of its own; without one, it gets an empty directory of ours."""
    env = dict(runtime_env or {})
    env.setdefault("working_dir", _empty_working_dir())
    return env


def start_reaper(
    options: dict[str, str | None], *, site: bool, what: str
) -> subprocess.Popen[bytes] | None:
    """A started :mod:`.reaper` (``options`` as it documents), isolated, outside any workspace,
    in a session of its own (no Ctrl-C from the terminal, in no run's group); ``site`` False
    leaves ``site-packages`` out (the local reaper needs nothing but the standard library).
    None, with a warning naming ``what``, when it cannot start."""
    flags = [] if site else ["-S"]
    try:
        return subprocess.Popen(
            python_argv(*flags, reaper.__file__, json.dumps(options)),
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
            cwd=HOST_CWD,
        )
    except OSError as e:
        logger.warning(f"{what}: no reaper, processes may outlive a crash ({e})")
        return None
