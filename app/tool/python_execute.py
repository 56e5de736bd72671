"""``python_execute``: run a Python snippet in a fresh, bounded child process.

Each call gets its own interpreter (``sys.executable``) started in a new session, with the
workspace as working directory. The code travels over stdin to a tiny bootstrap that applies
resource limits, redirects stdin to ``/dev/null`` and runs the code as ``__main__``, so
nothing is written to disk and tracebacks point at the snippet's own lines.

Containment, and what actually enforces it:

* wall-clock timeout: the whole process group gets SIGTERM, then SIGKILL after a grace;
* memory, CPU seconds and file size: ``setrlimit`` in the child (per process);
* number of processes: a watchdog polls ``/proc`` and kills the group once it has more than
  ``max_processes`` live members. RLIMIT_NPROC is not used: Linux never applies it to root and
  otherwise counts *every* process of the user, so no fixed value is both safe and useful. A
  very fast fork bomb can overshoot the limit by a few hundred processes before it is stopped;
* leftovers: after every run (success, failure, timeout or cancellation) the process group is
  killed, so background children never outlive the call.

Without a ``sandbox`` this bounds accidents, it is not a security sandbox: code that calls
``setsid`` leaves the group. With one (``app.sandbox``: local, bubblewrap, docker) the command
is wrapped by that backend and the limits come from ``[sandbox]``. Either way the child never
inherits credentials from the environment.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field

from app.exceptions import SandboxError
from app.sandbox.environment import scrub_environment
from app.sandbox.processes import ProcessScope, finish_run
from app.sandbox.sizes import format_size
from app.tool._process import (
    OutputBuffer,
    PipeProtocol,
    compose_streams,
    describe_returncode,
    format_seconds,
)
from app.tool.base import BaseTool
from app.tool.file_access import resolve_workspace

if TYPE_CHECKING:
    from app.sandbox.base import Sandbox

__all__ = ["PythonExecute"]

_FILENAME = "<python_execute>"
_GIB = 1024**3

# Runs inside the child before the model's code. Everything lives in one function so that the
# ``__main__`` namespace the code sees is clean (the function removes its own name).
_BOOTSTRAP = r"""
def _openmanus_bootstrap():
    import json, linecache, os, signal, sys, traceback

    settings = json.loads(sys.argv[1])
    source = sys.stdin.buffer.read().decode("utf-8", "surrogatepass")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    try:
        import resource
    except ImportError:
        resource = None
    if resource is not None:
        for name, value in settings["limits"].items():
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

    leader = os.getpid()

    class _Terminated(BaseException):
        pass

    def _on_term(signum, frame):
        if os.getpid() != leader:
            os._exit(128 + signum)
        raise _Terminated

    signal.signal(signal.SIGTERM, _on_term)
    # Inherited dispositions: an agent started in the background ignores SIGINT.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for name in ("SIGQUIT", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, ())
    sys.stdout.reconfigure(encoding="utf-8", errors="backslashreplace", line_buffering=True)
    sys.stderr.reconfigure(encoding="utf-8", errors="backslashreplace")
    filename = settings["filename"]
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    sys.argv = ["-c"]
    namespace = sys.modules["__main__"].__dict__
    namespace.pop("_openmanus_bootstrap", None)
    status = 0
    try:
        exec(compile(source, filename, "exec"), namespace)
    except SystemExit as exc:
        if exc.code is None:
            status = 0
        elif isinstance(exc.code, int):
            status = exc.code
        else:
            print(exc.code, file=sys.stderr)
            status = 1
    except _Terminated:
        status = 128 + signal.SIGTERM
    except BaseException as exc:
        tb = exc.__traceback__
        traceback.print_exception(type(exc), exc, tb.tb_next if tb is not None else None)
        status = 1
    if os.getpid() == leader:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    sys.exit(status)


_openmanus_bootstrap()
"""

_DESCRIPTION = (
    "Run a Python program in a fresh interpreter and get back what it printed. Only output "
    "written to stdout/stderr (e.g. with print) is returned, not the value of the last "
    "expression, and no state is kept between calls. The working directory is the workspace. "
    "Standard input is empty, so input() cannot be used. Runs are bounded: a timeout "
    "(5 seconds unless `timeout` asks for more), memory and process limits; long output is "
    "truncated. Returns {observation, success}."
)


class PythonExecute(BaseTool):
    """Runs model-written Python in a separate, killable process (upstream name and schema)."""

    name: str = "python_execute"
    description: str = _DESCRIPTION
    parameters: dict[str, Any] | None = Field(
        default_factory=lambda: {
            "type": "object",
            "properties": {
                "code": {
                    "type": "string",
                    "description": "The Python source to run. Print whatever you want to see.",
                },
                "timeout": {
                    "type": "integer",
                    "description": "Seconds before the run is stopped (default 5).",
                },
            },
            "required": ["code"],
        }
    )

    workspace: Path | None = Field(
        default=None, description="Working directory; None means config.workspace_root."
    )
    default_timeout: float = Field(default=5.0, gt=0)
    max_timeout: float = Field(default=300.0, gt=0, description="Upper bound for `timeout`.")
    max_output_chars: int = Field(default=10_000, ge=200)
    memory_limit: int | None = Field(
        default=_GIB, gt=0, description="RLIMIT_AS in bytes, per process; None = no limit."
    )
    cpu_time_limit: int | None = Field(
        default=None,
        gt=0,
        description="RLIMIT_CPU in seconds, per process; None = timeout x CPU count + 1.",
    )
    file_size_limit: int | None = Field(
        default=_GIB, gt=0, description="RLIMIT_FSIZE in bytes; None = no limit."
    )
    max_processes: int | None = Field(
        default=128, gt=0, description="Live processes allowed in the group; None = no check."
    )
    process_check_interval: float = Field(default=0.05, gt=0)
    kill_grace: float = Field(default=1.0, ge=0, description="SIGTERM-to-SIGKILL delay.")
    sandbox: Any = Field(
        default=None,
        description="An app.sandbox.Sandbox to run in; its [sandbox] limits replace the "
        "memory/CPU/process fields above. None: a local process bounded by those fields.",
    )

    _ENV_DROP: ClassVar[tuple[str, ...]] = ("PYTHONINSPECT", "PYTHONSTARTUP")

    async def execute(  # type: ignore[override]
        self, code: str | None = None, timeout: float | str | None = None, **_: Any
    ) -> dict[str, Any]:
        """Run ``code``; always returns ``{"observation": str, "success": bool}``."""
        if not isinstance(code, str):
            return _result("Error: `code` is required and must be a string.", False)
        seconds = self._timeout_for(timeout)
        if isinstance(seconds, str):
            return _result(seconds, False)
        sandbox: Sandbox | None = self.sandbox
        if sandbox is not None:
            try:
                await sandbox.start()
            except SandboxError as exc:
                return _result(f"Error: the sandbox is not available: {exc}", False)
            return await self._run(code, seconds, sandbox.workspace)
        try:
            workspace = self._resolve_workspace()
        except OSError as exc:
            return _result(f"Error: the workspace directory is not usable: {exc}", False)
        return await self._run(code, seconds, workspace)

    async def cleanup(self) -> None:
        """Every run is already over when execute returns; release the sandbox, if any."""
        if self.sandbox is not None:
            await self.sandbox.cleanup()

    # --- helpers ---------------------------------------------------------------------------

    def _timeout_for(self, requested: float | str | None) -> float | str:
        """The timeout to use, or an error message for a nonsensical request."""
        if requested is None:
            return min(self.default_timeout, self._max_timeout())
        if isinstance(requested, bool):
            return "Error: `timeout` must be a number of seconds."
        try:
            value = float(requested)
        except (TypeError, ValueError):
            return "Error: `timeout` must be a number of seconds."
        if not math.isfinite(value) or value <= 0:
            return "Error: `timeout` must be a positive number of seconds."
        return min(value, self._max_timeout())

    def _max_timeout(self) -> float:
        if self.sandbox is not None:
            return min(self.max_timeout, self.sandbox.limits.timeout)
        return self.max_timeout

    def _memory_limit(self) -> int | None:
        return self.sandbox.limits.memory_bytes if self.sandbox is not None else self.memory_limit

    def _process_limit(self) -> int | None:
        if self.sandbox is not None:
            return self.sandbox.limits.max_processes
        return self.max_processes

    def _resolve_workspace(self) -> Path:
        return resolve_workspace(self.workspace)

    def _limits(self, seconds: float) -> dict[str, int]:
        if self.sandbox is not None:
            return self.sandbox.limits.rlimits(seconds)
        limits = {"RLIMIT_CORE": 0}
        if self.memory_limit is not None:
            limits["RLIMIT_AS"] = self.memory_limit
        if self.file_size_limit is not None:
            limits["RLIMIT_FSIZE"] = self.file_size_limit
        cpu = self.cpu_time_limit
        if cpu is None:
            # Never below what the wall-clock timeout lets a process use on every core.
            cpu = math.ceil(seconds) * (os.cpu_count() or 1) + 1
        limits["RLIMIT_CPU"] = cpu
        return limits

    def _environment(self) -> dict[str, str]:
        env = {k: v for k, v in scrub_environment().items() if k not in self._ENV_DROP}
        env.setdefault("MPLBACKEND", "Agg")  # plots go to files; there is no display
        return env

    async def _run(self, code: str, seconds: float, workspace: Path) -> dict[str, Any]:
        limit = self.max_output_chars
        stdout = OutputBuffer(limit, limit // 4)
        stderr = OutputBuffer(limit, limit // 4)
        sandbox: Sandbox | None = self.sandbox
        # In a sandbox the backend applies the limits (or the container does).
        limits = {} if sandbox is not None else self._limits(seconds)
        settings = json.dumps({"limits": limits, "filename": _FILENAME})
        python = sandbox.python if sandbox is not None else sys.executable or "python3"
        argv = [python, "-c", _BOOTSTRAP, settings]
        env, cwd = self._environment(), str(workspace)
        if sandbox is not None:
            spec = sandbox.command(argv, rlimits=self._limits(seconds), env=env)
            argv, env, cwd = spec.argv, spec.env, spec.cwd
        loop = asyncio.get_running_loop()
        try:
            transport, protocol = await loop.subprocess_exec(
                lambda: PipeProtocol({1: stdout.feed, 2: stderr.feed}),
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=cwd,
                env=env,
                start_new_session=True,
            )
        except OSError as exc:
            return _result(f"Error: could not start the Python interpreter: {exc}", False)

        pid = transport.get_pid()
        scope = sandbox.scope(pid) if sandbox is not None else ProcessScope(pid)
        max_processes = self._process_limit()
        stdin = transport.get_pipe_transport(0)
        if stdin is not None:
            stdin.write(code.encode("utf-8", "surrogatepass"))
            stdin.close()  # flushes, then closes: the bootstrap reads up to EOF

        exited = asyncio.ensure_future(protocol.exited.wait())
        watchdog = (
            asyncio.ensure_future(scope.watch_size(max_processes, self.process_check_interval))
            if max_processes is not None
            else None
        )
        stop_reason: str | None = None
        try:
            waiting = {exited} if watchdog is None else {exited, watchdog}
            done, _ = await asyncio.wait(
                waiting, timeout=seconds, return_when=asyncio.FIRST_COMPLETED
            )
            if exited not in done:
                if watchdog is not None and watchdog in done:
                    stop_reason = "processes"
                    scope.signal(signal.SIGKILL)
                else:
                    stop_reason = "timeout"
                    await scope.terminate(protocol.exited, grace=self.kill_grace)
            await finish_run(scope, protocol, transport)
        except BaseException:
            # Cancelled (or something broke): nothing of the child may survive us.
            scope.signal(signal.SIGKILL)
            await asyncio.shield(finish_run(scope, protocol, transport))
            raise
        finally:
            for task in (exited, watchdog):
                if task is not None:
                    task.cancel()
            transport.close()

        stdout.close()
        stderr.close()
        returncode = transport.get_returncode()
        if sandbox is not None:
            returncode = sandbox.exit_status(returncode)
        success = stop_reason is None and returncode == 0
        return _result(self._observation(stdout, stderr, returncode, stop_reason, seconds), success)

    def _observation(
        self,
        stdout: OutputBuffer,
        stderr: OutputBuffer,
        returncode: int | None,
        stop_reason: str | None,
        seconds: float,
    ) -> str:
        out_text, err_text = compose_streams(stdout, stderr, self.max_output_chars)
        parts: list[str] = []
        if stop_reason == "timeout":
            parts.append(
                f"Execution timed out after {format_seconds(seconds)} seconds; the process "
                "and everything it started were killed."
            )
        elif stop_reason == "processes":
            parts.append(
                f"Execution stopped: the code ran more than {self._process_limit()} processes at "
                "once (the limit); all of them were killed."
            )
        if out_text:
            # After a headline, label stdout too so it is not mistaken for our message.
            parts.append(("[stdout]\n" if parts else "") + out_text.rstrip("\n"))
        if err_text:
            parts.append("[stderr]\n" + err_text.rstrip("\n"))
        if stop_reason is None and returncode != 0:
            parts.append(f"[{self._explain(returncode, seconds)}]")
        memory = self._memory_limit()
        if "MemoryError" in err_text and memory is not None:
            kind = "of data" if self.sandbox is not None else "of address space"
            parts.append(f"[memory limit: {format_size(memory)} {kind} per process]")
        if "File too large" in err_text and self.file_size_limit is not None:
            parts.append(f"[file size limit: {_human_bytes(self.file_size_limit)}]")
        return "\n".join(parts)

    def _explain(self, returncode: int | None, seconds: float) -> str:
        text = describe_returncode(returncode)
        if returncode == -signal.SIGXCPU:
            cpu = self._limits(seconds).get("RLIMIT_CPU")
            text += f": the CPU time limit of {cpu} seconds was reached"
        elif returncode == -signal.SIGXFSZ and self.file_size_limit is not None:
            text += f": the file size limit of {_human_bytes(self.file_size_limit)} was reached"
        return text



def _result(observation: str, success: bool) -> dict[str, Any]:
    return {"observation": observation, "success": success}


def _human_bytes(size: int) -> str:
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if size >= scale:
            return f"{size / scale:g} {unit}"
    return f"{size} bytes"
