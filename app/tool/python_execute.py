"""``python_execute``: run a Python snippet in a fresh, bounded child process.

The code travels over stdin to a small bootstrap that runs it as ``__main__`` (nothing on
disk; tracebacks point at the snippet's lines), in the sandbox (``app.sandbox``), with its
timeout, rlimits and process limit, and no process of the run outlives the call
(``app.sandbox.base.run_bounded``). The child never inherits credentials from the environment.
"""

from __future__ import annotations

import json
import math
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field

from app.exceptions import SandboxError
from app.sandbox.base import BoundedRun, run_bounded
from app.sandbox.environment import scrub_environment
from app.sandbox.factory import create_sandbox, describe_start_error
from app.sandbox.processes import compose_streams, describe_returncode, format_seconds
from app.tool.base import BaseTool
from app.tool.declared import ToolArgs
from app.utils.sizes import format_size

if TYPE_CHECKING:
    from app.sandbox.base import Sandbox

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
            return _result(f"Error: {describe_start_error(exc)}", False)
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
        spec = sandbox.command(
            [sandbox.python, "-c", _BOOTSTRAP, json.dumps({"filename": _FILENAME})],
            rlimits=self._limits(seconds),
            env=self._environment(),
        )
        try:
            run = await run_bounded(
                sandbox,
                spec,
                timeout=seconds,
                max_output=self.max_output_chars,
                max_processes=self._process_limit(),
                stdin=code.encode("utf-8", "surrogatepass"),
                interval=self.process_check_interval,
                grace=self.kill_grace,
            )
        except OSError as exc:
            return _result(f"Error: could not start the Python interpreter: {exc}", False)
        success = run.stopped is None and run.returncode == 0
        return _result(self._observation(run, seconds), success)

    def _observation(self, run: BoundedRun, seconds: float) -> str:
        out_text, err_text = compose_streams(run.stdout, run.stderr, self.max_output_chars)
        stop_reason, returncode = run.stopped, run.returncode
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
            parts.append(f"[file size limit: {format_size(size)}]")
        return "\n".join(parts)

    def _explain(self, returncode: int | None, seconds: float) -> str:
        text = describe_returncode(returncode)
        if returncode == -signal.SIGXCPU:
            cpu = self._limits(seconds).get("RLIMIT_CPU")
            text += f": the CPU time limit of {cpu} seconds was reached"
        elif returncode == -signal.SIGXFSZ and "RLIMIT_FSIZE" in self._limits(seconds):
            size = self._limits(seconds)["RLIMIT_FSIZE"]
            text += f": the file size limit of {format_size(size)} was reached"
        return text


def _tighter(base: int | None, mine: int | None) -> int | None:
    if base is None:
        return mine
    return base if mine is None else min(base, mine)


def _result(observation: str, success: bool) -> dict[str, Any]:
    return {"observation": observation, "success": success}
