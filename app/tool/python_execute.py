"""``python_execute``: run a Python snippet in a fresh, bounded child process.

Each call gets its own interpreter (the sandbox's ``python``) started in a new session, with
the workspace as working directory. The code travels over stdin to a tiny bootstrap that
redirects stdin to ``/dev/null`` and runs the code as ``__main__``, so nothing is written to
disk and tracebacks point at the snippet's own lines.

There is always a sandbox (``app.sandbox``: local, bubblewrap, docker; by default the one
``app.sandbox.factory`` builds from ``[sandbox]``), and it enforces the containment:

* wall-clock timeout: the whole run gets SIGTERM, then SIGKILL after a grace;
* memory, CPU seconds and file size: rlimits set by the sandbox's launcher (per process);
  the fields below can only tighten them;
* number of processes: the sandbox's limit for its whole life (a cgroup, else a watchdog),
  and this run is stopped once it reaches it;
* leftovers: after every run (success, failure, timeout or cancellation) every process of the
  run is killed, so background children never outlive the call.

The child never inherits credentials from the environment.
"""

from __future__ import annotations

import asyncio
import json
import math
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field

from app.exceptions import SandboxError
from app.sandbox.environment import scrub_environment
from app.sandbox.factory import create_sandbox
from app.sandbox.processes import (
    OutputBuffer,
    PipeProtocol,
    compose_streams,
    describe_returncode,
    finish_run,
    format_seconds,
)
from app.tool.base import BaseTool
from app.tool.declared import ToolArgs
from app.utils.sizes import format_size

if TYPE_CHECKING:
    from app.sandbox.base import Sandbox

__all__ = ["PythonExecute"]

_FILENAME = "<python_execute>"

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


class PythonExecuteArgs(ToolArgs):
    code: str = Field(description="The Python source to run. Print whatever you want to see.")
    timeout: int | None = Field(None, description="Seconds before the run is stopped (default 5).")


class PythonExecute(BaseTool):
    """Runs model-written Python in a separate, killable process (upstream name and schema)."""

    name: str = "python_execute"
    description: str = _DESCRIPTION
    Args: ClassVar[type[ToolArgs]] = PythonExecuteArgs

    workspace: Path | None = Field(
        default=None, description="Working directory; None means config.workspace_root."
    )
    default_timeout: float = Field(default=5.0, gt=0)
    max_timeout: float = Field(default=300.0, gt=0, description="Upper bound for `timeout`.")
    max_output_chars: int = Field(default=10_000, ge=200)
    memory_limit: int | None = Field(
        default=None,
        gt=0,
        description="RLIMIT_DATA in bytes, per process, below the "
        "sandbox's memory limit; None = the sandbox's.",
    )
    cpu_time_limit: int | None = Field(
        default=None,
        gt=0,
        description="RLIMIT_CPU in seconds, below the sandbox's; None = "
        "the sandbox's (its cpu_limit x the timeout).",
    )
    file_size_limit: int | None = Field(
        default=None,
        gt=0,
        description="RLIMIT_FSIZE in bytes below the sandbox's; None = the sandbox's.",
    )
    max_processes: int | None = Field(
        default=None,
        gt=0,
        description="Processes a run may reach, below the sandbox's limit; None = the sandbox's.",
    )
    process_check_interval: float = Field(default=0.05, gt=0)
    kill_grace: float = Field(default=1.0, ge=0, description="SIGTERM-to-SIGKILL delay.")
    sandbox: Any = Field(
        default=None,
        description="The app.sandbox.Sandbox code runs in; None = one from app.sandbox.factory "
        "for `workspace` (the configured [sandbox] backend).",
    )

    _ENV_DROP: ClassVar[tuple[str, ...]] = ("PYTHONINSPECT", "PYTHONSTARTUP")

    async def execute(self, code: str, timeout: float | None = None, **_: Any) -> dict[str, Any]:
        """Run ``code``; always returns ``{"observation": str, "success": bool}``. The model
        sends whole seconds (its schema says integer); Python callers may pass a float."""
        seconds = self._timeout_for(timeout)
        if isinstance(seconds, str):
            return _result(seconds, False)
        try:
            sandbox = self.box()
            await sandbox.start()
        except OSError as exc:
            return _result(f"Error: the workspace directory is not usable: {exc}", False)
        except SandboxError as exc:
            return _result(f"Error: the sandbox is not available: {exc}", False)
        return await self._run(code, seconds, sandbox)

    def box(self) -> Sandbox:
        """The sandbox code runs in: the one given, else one from the factory (built on first
        use, so a tool can be made before the configuration is loaded)."""
        if self.sandbox is None:
            self.sandbox = create_sandbox(workspace=self.workspace)
        return self.sandbox

    async def cleanup(self) -> None:
        """Every run is already over when execute returns; release the sandbox."""
        if self.sandbox is not None:
            await self.sandbox.cleanup()

    # --- helpers ---------------------------------------------------------------------------

    def _timeout_for(self, requested: float | None) -> float | str:
        """The timeout to use, or an error message for one its type allows but is no use."""
        if requested is None:
            return min(self.default_timeout, self._max_timeout())
        value = float(requested)
        if not math.isfinite(value) or value <= 0:
            return "Error: `timeout` must be a positive number of seconds."
        return min(value, self._max_timeout())

    def _max_timeout(self) -> float:
        return min(self.max_timeout, self.box().limits.timeout)

    def _memory_limit(self) -> int | None:
        return _tighter(self.box().limits.memory_bytes, self.memory_limit)

    def _process_limit(self) -> int | None:
        return _tighter(self.box().limits.max_processes, self.max_processes)

    def _limits(self, seconds: float) -> dict[str, int]:
        limits = self.box().limits.rlimits(seconds)
        for name, mine in (
            ("RLIMIT_DATA", self.memory_limit),
            ("RLIMIT_CPU", self.cpu_time_limit),
            ("RLIMIT_FSIZE", self.file_size_limit),
        ):
            value = _tighter(limits.get(name), mine)
            if value is not None:
                limits[name] = value
        return limits

    def _environment(self) -> dict[str, str]:
        env = {k: v for k, v in scrub_environment().items() if k not in self._ENV_DROP}
        env.setdefault("MPLBACKEND", "Agg")  # plots go to files; there is no display
        return env

    async def _run(self, code: str, seconds: float, sandbox: Sandbox) -> dict[str, Any]:
        limit = self.max_output_chars
        stdout = OutputBuffer(limit, limit // 4)
        stderr = OutputBuffer(limit, limit // 4)
        settings = json.dumps({"filename": _FILENAME})
        spec = sandbox.command(
            [sandbox.python, "-c", _BOOTSTRAP, settings],
            rlimits=self._limits(seconds),
            env=self._environment(),
        )
        loop = asyncio.get_running_loop()
        refused = sandbox.guard.refused()
        try:
            transport, protocol = await loop.subprocess_exec(
                lambda: PipeProtocol({1: stdout.feed, 2: stderr.feed}),
                *spec.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=spec.cwd,
                env=spec.env,
                start_new_session=True,
            )
        except OSError as exc:
            return _result(f"Error: could not start the Python interpreter: {exc}", False)

        pid = transport.get_pid()
        scope = sandbox.scope(pid)
        max_processes = self._process_limit()
        stdin = transport.get_pipe_transport(0)
        if isinstance(stdin, asyncio.WriteTransport):
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

        if stop_reason is None and sandbox.guard.refused() > refused:
            stop_reason = "processes"  # the kernel refused a fork: the limit was reached
        stdout.close()
        stderr.close()
        returncode = sandbox.exit_status(transport.get_returncode())
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
                f"Execution stopped: the code reached the limit of {self._process_limit()} "
                "processes at once; all of them were killed."
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
            parts.append(f"[memory limit: {format_size(memory)} of data per process]")
        size = self._limits(seconds).get("RLIMIT_FSIZE")
        if "File too large" in err_text and size is not None:
            parts.append(f"[file size limit: {_human_bytes(size)}]")
        return "\n".join(parts)

    def _explain(self, returncode: int | None, seconds: float) -> str:
        text = describe_returncode(returncode)
        if returncode == -signal.SIGXCPU:
            cpu = self._limits(seconds).get("RLIMIT_CPU")
            text += f": the CPU time limit of {cpu} seconds was reached"
        elif returncode == -signal.SIGXFSZ and "RLIMIT_FSIZE" in self._limits(seconds):
            size = self._limits(seconds)["RLIMIT_FSIZE"]
            text += f": the file size limit of {_human_bytes(size)} was reached"
        return text


def _tighter(base: int | None, mine: int | None) -> int | None:
    if base is None:
        return mine
    return base if mine is None else min(base, mine)


def _result(observation: str, success: bool) -> dict[str, Any]:
    return {"observation": observation, "success": success}


def _human_bytes(size: int) -> str:
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if size >= scale:
            return f"{size / scale:g} {unit}"
    return f"{size} bytes"
