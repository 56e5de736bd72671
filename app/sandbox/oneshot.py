"""One command in a sandbox, start to finish: what :meth:`Sandbox.run` does.

For library callers that want "run this and tell me what happened" without a tool around
it; the same process handling as the tools: bounded output, a timeout that kills the whole
run, a process-count watchdog, and nothing left running afterwards.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from app.sandbox.processes import (
    OutputBuffer,
    PipeProtocol,
    ProcessScope,
    finish_run,
    format_seconds,
)

if TYPE_CHECKING:
    from app.sandbox.base import ExecResult, Sandbox

__all__ = ["MAX_OUTPUT_CHARS", "run_oneshot"]

MAX_OUTPUT_CHARS = 100_000


async def run_oneshot(sandbox: Sandbox, argv: list[str], timeout: float) -> ExecResult:
    """``argv`` in ``sandbox``, stdin empty, killed after ``timeout`` seconds."""
    from app.sandbox.base import ExecResult

    stdout = OutputBuffer(MAX_OUTPUT_CHARS, MAX_OUTPUT_CHARS // 4)
    stderr = OutputBuffer(MAX_OUTPUT_CHARS, MAX_OUTPUT_CHARS // 4)
    spec = sandbox.command(argv, rlimits=sandbox.limits.rlimits(timeout))
    loop = asyncio.get_running_loop()
    refused = sandbox.guard.refused()
    transport, protocol = await loop.subprocess_exec(
        lambda: PipeProtocol({1: stdout.feed, 2: stderr.feed}),
        *spec.argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=spec.cwd,
        env=spec.env,
        start_new_session=True,
    )
    scope = sandbox.scope(transport.get_pid())
    exited = asyncio.ensure_future(protocol.exited.wait())
    limit = sandbox.limits.max_processes
    watchdog = asyncio.ensure_future(scope.watch_size(limit, 0.05)) if limit else None
    notes: list[str] = []
    timed_out = False
    try:
        waiting = {exited} if watchdog is None else {exited, watchdog}
        done, _ = await asyncio.wait(waiting, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if exited not in done:
            if watchdog is not None and watchdog in done:
                notes.append(f"stopped: reached the limit of {limit} processes")
                await scope.kill()
            else:
                timed_out = True
                notes.append(f"timed out after {format_seconds(timeout)} seconds")
                await scope.terminate(protocol.exited, grace=1.0)
        elif limit and (sandbox.guard.refused() > refused or await _live_count(scope) >= limit):
            # The program spawned its crowd and exited between two watchdog polls.
            notes.append(f"stopped: reached the limit of {limit} processes")
    finally:
        await asyncio.shield(finish_run(scope, protocol, transport))
        for task in (exited, watchdog):
            if task is not None:
                task.cancel()
    stdout.close()
    stderr.close()
    code = sandbox.exit_status(transport.get_returncode())
    return ExecResult(
        exit_code=None if (timed_out or notes) else code,
        stdout=stdout.render(MAX_OUTPUT_CHARS),
        stderr=stderr.render(MAX_OUTPUT_CHARS),
        timed_out=timed_out,
        notes=notes,
    )


async def _live_count(scope: ProcessScope) -> int:
    """How many of the run's processes are alive (0 when ``/proc`` cannot tell)."""
    members = await asyncio.to_thread(scope.members)
    return len(members) if members is not None else 0
