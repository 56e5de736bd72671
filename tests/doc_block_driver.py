"""Runs the docs' Python blocks for ``tests/test_doc_blocks.py``, one unit at a time, in one
interpreter (imports are paid once).

The protocol is one JSON object per line: a unit on the private copy of stdin, its outcome on
the private copy of stdout. The blocks themselves get ``/dev/null`` as stdin, and their
stdout and stderr (file descriptors 1 and 2, so subprocesses' output too) go to the unit's
``output`` file.

Each unit runs in a fresh namespace as ``__main__``, in its own working directory, with the
config file it names active (``config.reset()`` then ``$OPENMANUS_CONFIG``), fresh ``LLM``
instances, its environment variables set (and restored after), on one event loop: a block
with top-level ``await`` runs on it (as in ``python -m asyncio``), so the blocks of a chain
share their objects; a block may also call ``asyncio.run`` itself. Coroutine or plain
functions named ``test_*`` that the unit defines are then called, as pytest would.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import json
import os
import sys
import time
import traceback
from typing import Any

from app.config import config
from app.llm import LLM


def run_unit(unit: dict[str, Any]) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    saved = {key: os.environ.get(key) for key in unit["env"]}
    os.environ.update(unit["env"])
    os.environ["OPENMANUS_CONFIG"] = unit["config"]
    config.reset()
    LLM.reset_instances()
    os.chdir(unit["cwd"])
    error = None
    try:
        for block in unit["blocks"]:
            # Blank lines first, so that a traceback's line numbers are the page's.
            source = "\n" * block["line"] + block["code"]
            # dont_inherit: this module's ``from __future__ import annotations`` is not theirs.
            flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
            code = compile(source, block["page"], "exec", flags=flags, dont_inherit=True)
            if code.co_flags & inspect.CO_COROUTINE:
                loop.run_until_complete(eval(code, namespace))
            else:
                exec(code, namespace)
        for name, value in list(namespace.items()):
            if name.startswith("test_") and inspect.isfunction(value):
                outcome = value()
                if inspect.isawaitable(outcome):
                    loop.run_until_complete(outcome)
    except BaseException:  # a SystemExit or KeyboardInterrupt of a block is its failure too
        error = traceback.format_exc()
    finally:
        try:
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            asyncio.set_event_loop(None)
            loop.close()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return {"error": error}


def main() -> None:
    requests = os.fdopen(os.dup(0), "r", encoding="utf-8")
    replies = os.fdopen(os.dup(1), "w", encoding="utf-8")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    for line in requests:
        unit = json.loads(line)
        output = os.open(unit["output"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(output, 1)
        os.dup2(output, 2)
        os.close(output)
        started = time.monotonic()
        try:
            outcome = run_unit(unit)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
        outcome["seconds"] = round(time.monotonic() - started, 3)
        replies.write(json.dumps(outcome) + "\n")
        replies.flush()


if __name__ == "__main__":
    main()
