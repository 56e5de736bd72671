"""One program in a sandbox, start to finish: bounded output, a timeout that stops the whole
run, the process limit watched, nothing left running (``Sandbox.run``, ``python_execute``)."""

from __future__ import annotations

import asyncio
import signal
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from app.sandbox.processes import OutputBuffer, PipeProtocol, finish_run

if TYPE_CHECKING:
    from app.sandbox.base import LaunchSpec, Sandbox

__all__ = ["BoundedRun", "run_bounded"]


@dataclass
class BoundedRun:
    """What a run left: its output, exit status (negative: a signal) and why it was stopped."""

    stdout: OutputBuffer
    stderr: OutputBuffer
    returncode: int | None
    stopped: Literal["timeout", "processes"] | None


async def run_bounded(
    sandbox: Sandbox,
    spec: LaunchSpec,
    *,
    timeout: float,
    max_output: int,
    max_processes: int | None,
    stdin: bytes | None = None,
    interval: float = 0.05,
    grace: float = 1.0,
) -> BoundedRun:
    """Run ``spec`` (from ``sandbox.command``) with ``stdin`` (else none); raises ``OSError``
    when it cannot start. Cancelled, the run is killed before the cancellation goes on."""
    stdout = OutputBuffer(max_output, max_output // 4)
    stderr = OutputBuffer(max_output, max_output // 4)
    refused = sandbox.guard.refused()
    transport, protocol = await asyncio.get_running_loop().subprocess_exec(
        lambda: PipeProtocol({1: stdout.feed, 2: stderr.feed}),
        *spec.argv,
        stdin=asyncio.subprocess.DEVNULL if stdin is None else asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=spec.cwd,
        env=spec.env,
        start_new_session=True,
    )
    scope = sandbox.scope(transport.get_pid())
    pipe = transport.get_pipe_transport(0)
    if stdin is not None and isinstance(pipe, asyncio.WriteTransport):
        pipe.write(stdin)
        pipe.close()  # flushes, then closes: the program reads up to EOF
    exited = asyncio.ensure_future(protocol.exited.wait())
    watchdog = (
        asyncio.ensure_future(scope.watch_size(max_processes, interval)) if max_processes else None
    )
    stopped: Literal["timeout", "processes"] | None = None
    try:
        waiting = {exited} if watchdog is None else {exited, watchdog}
        done, _ = await asyncio.wait(waiting, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if exited not in done:
            if watchdog is not None and watchdog in done:
                stopped = "processes"
                await scope.kill()
            else:
                stopped = "timeout"
                await scope.terminate(protocol.exited, grace=grace)
        elif max_processes and sandbox.guard.refused() == refused:
            # The program may have spawned its crowd and exited between two watchdog polls.
            members = await asyncio.to_thread(scope.members)
            if members is not None and len(members) >= max_processes:
                stopped = "processes"
    except BaseException:
        scope.signal(signal.SIGKILL)  # cancelled (or something broke): nothing may survive us
        raise
    finally:
        await asyncio.shield(finish_run(scope, protocol, transport))
        for task in (exited, watchdog):
            if task is not None:
                task.cancel()
    if stopped is None and sandbox.guard.refused() > refused:
        stopped = "processes"  # the kernel refused a fork: the limit was reached
    stdout.close()
    stderr.close()
    return BoundedRun(stdout, stderr, sandbox.exit_status(transport.get_returncode()), stopped)
