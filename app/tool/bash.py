"""``bash``: one persistent shell per tool instance, so ``cd`` and ``export`` carry over; how
commands run, are interrupted and end (markers, SIGINT, ``< /dev/null``): docs/tools.md."""

from __future__ import annotations

import asyncio
import contextlib
import re
import secrets
import shlex
import signal
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field, PrivateAttr

from app.exceptions import SandboxError
from app.sandbox.base import Sandbox
from app.sandbox.environment import scrub_environment
from app.sandbox.factory import create_sandbox, describe_start_error
from app.sandbox.processes import (
    PipeProtocol,
    compose_streams,
    describe_returncode,
    format_seconds,
    in_thread,
)
from app.tool.base import BaseTool, CLIResult, ToolFailure, ToolResult
from app.tool.declared import ToolArgs
from app.tool.progress import keep_partial_output
from app.tool.shell_session import (
    IDLE_POLL,
    MARK_ERR_FD,
    MARK_OUT_FD,
    ShellSession,
    StreamWatcher,
    marker,
    print_marker,
)

_RESTART_NOTE = "so the working directory and environment variables were reset"

_DESCRIPTION = (
    "Run a command in a persistent bash shell (the working directory starts at the "
    "workspace). State carries over between calls: cd, exported variables and shell "
    "functions stay. Commands get no input (stdin is empty), so never start programs that "
    "wait for a user: pass options such as -y, or feed input through files or heredocs. "
    "Long-running servers belong in the background (`cmd > out.log 2>&1 &`); a command still "
    "running after the timeout is interrupted like Ctrl+C. stdout and stderr are both "
    "returned (stderr under a [stderr] label) with the exit code when it is not 0; very long "
    "output is truncated, so filter it (grep, head, tail). Set `restart` to true to get a "
    "fresh shell."
)


class BashArgs(ToolArgs):
    command: str = Field(
        description="The shell command to run; several lines or `&&` chains are fine."
    )
    restart: bool | None = Field(
        None,
        description="Kill the current shell and start a fresh one (in the workspace) "
        "before running `command`, which may then be empty.",
    )


class Bash(BaseTool):
    """A persistent bash session for the model (upstream name and schema)."""

    name: str = "bash"
    description: str = _DESCRIPTION
    Args: ClassVar[type[ToolArgs]] = BashArgs

    workspace: Path | None = Field(
        default=None, description="Starting directory; None means config.workspace_root."
    )
    timeout: float = Field(default=120.0, gt=0, description="Seconds a command may run.")
    interrupt_grace: float = Field(
        default=3.0, gt=0, description="How long the shell may take to recover from SIGINT."
    )
    startup_timeout: float = Field(default=10.0, gt=0)
    max_output_chars: int = Field(default=10_000, ge=200)
    sandbox: Any = Field(
        default=None,
        description="The app.sandbox.Sandbox the shell runs in (its limits apply); None = one "
        "from app.sandbox.factory for `workspace` (the configured [sandbox] backend).",
    )

    _session: ShellSession | None = PrivateAttr(default=None)
    _notice: str | None = PrivateAttr(default=None)  # for the next result
    _lock: asyncio.Lock | None = PrivateAttr(default=None)
    _lock_loop: asyncio.AbstractEventLoop | None = PrivateAttr(default=None)

    async def execute(
        self,
        command: str | None = None,
        restart: bool = False,
        timeout: float | None = None,
        **_: Any,
    ) -> ToolResult:
        """Run ``command`` (``timeout`` is for programmatic callers; not in the schema)."""
        if command is not None and not isinstance(command, str):
            return ToolFailure(error="`command` must be a string.")
        command = (command or "").replace("\x00", "")
        if isinstance(restart, str):  # models sometimes send "true"/"false" as strings
            restart = restart.strip().lower() == "true"
        if not restart and not command.strip():
            return ToolFailure(
                error="No command given: `command` must be a non-empty shell command."
            )
        async with self._get_lock():
            if restart:
                await self._stop_session()
                if not command.strip():
                    try:
                        await self._ensure_session()
                    except _StartError as exc:
                        return ToolFailure(error=str(exc))
                    return CLIResult(
                        output="The bash session was restarted: a fresh shell in the workspace."
                    )
            try:
                session = await self._ensure_session()
            except _StartError as exc:
                return ToolFailure(error=str(exc))
            result = await self._run(session, command, self._command_timeout(timeout))
            notice, self._notice = self._notice, None
            if notice is None:
                return result
            if result.error:
                return result.replace(error=f"{notice}\n{result.error}")
            return result.replace(output=f"{notice}\n{result.output}" if result.output else notice)

    def box(self) -> Sandbox:
        """The sandbox commands run in: the one given, else one from the factory (built on
        first use, so a tool can be made before the configuration is loaded)."""
        if self.sandbox is None:
            self.sandbox = create_sandbox(workspace=self.workspace)
        return self.sandbox

    def _command_timeout(self, requested: float | None) -> float:
        return min(requested or self.timeout, self.box().limits.timeout)

    def _process_limit(self) -> int | None:
        return self.box().limits.max_processes

    async def cleanup(self) -> None:
        """Kill the shell and its children (and release the sandbox); the next call starts
        afresh."""
        await self._stop_session()
        if self.sandbox is not None:
            await self.sandbox.cleanup()

    @property
    def session_pid(self) -> int | None:
        """Process id (and process group id) of the live shell, if any."""
        session = self._session
        return session.pgid if session is not None and session.alive else None

    # --- session management ----------------------------------------------------------------

    def _get_lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock_loop is not loop:
            self._lock = asyncio.Lock()
            self._lock_loop = loop
        return self._lock

    async def _stop_session(self) -> None:
        session, self._session = self._session, None
        if session is None:
            return
        if session.loop is asyncio.get_running_loop():
            await session.close()
        else:
            session.abandon()

    async def _ensure_session(self) -> ShellSession:
        session = self._session
        if session is not None and session.alive and session.loop is asyncio.get_running_loop():
            return session
        if session is not None and session.over_limit is not None:
            self._notice = (
                "[the previous shell was killed after its last command: the processes it left "
                f"in the background reached the sandbox's limit of {self._process_limit()} "
                "processes at once (a fork bomb?). This command ran in a new shell, "
                f"{_RESTART_NOTE}]"
            )
        await self._stop_session()
        self._session = await self._start_session()
        return self._session

    def _environment(self) -> dict[str, str]:
        env = {
            k: v
            for k, v in scrub_environment().items()
            if k not in ("PROMPT_COMMAND", "BASH_ENV", "ENV", "MAILCHECK")
        }
        # No terminal here: no prompts, no pagers, no colours; no history loaded nor saved.
        env.update(PS1="", PS2="", PS0="", TERM="dumb", PAGER="cat", GIT_PAGER="cat", HISTFILE="")
        return env

    async def _start_session(self) -> ShellSession:
        try:
            sandbox = self.box()
            await sandbox.start()
        except OSError as exc:
            problem = describe_start_error(exc)
            raise _StartError(problem[0].upper() + problem[1:]) from exc
        except SandboxError as exc:
            raise _StartError(f"The sandbox is not available: {exc}") from exc
        stdout = StreamWatcher(self.max_output_chars)
        stderr = StreamWatcher(self.max_output_chars)
        loop = asyncio.get_running_loop()
        shell = sandbox.shell
        spec = sandbox.command(
            [shell, "--noediting", "--noprofile", "--norc", "-i"],
            rlimits=sandbox.limits.rlimits(sandbox.limits.timeout),
            env=self._environment(),
        )
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
            raise _StartError(f"Could not start bash ({shell}): {exc}") from exc
        scope = sandbox.scope(transport.get_pid())
        session = ShellSession(loop, transport, protocol, stdout, stderr, scope)
        token = secrets.token_hex(8)
        ready = marker(token, "C")
        stdout.expect(ready)
        stderr.expect(ready)
        setup = (
            "set +H; set +o history; unset HISTFILE; "
            f"exec {MARK_OUT_FD}>&1 {MARK_ERR_FD}>&2; "
            '__om_status() { return "$1"; }; ' + print_marker(token, "C", "0") + "\n"
        )
        try:
            session.send(setup)
            state = await session.wait_for_markers(self.startup_timeout)
        except (ConnectionResetError, asyncio.CancelledError):
            await asyncio.shield(session.close())
            raise
        if state != "done":
            noise = stderr.take().render(500).strip()
            await session.close()
            raise _StartError(
                f"bash did not start properly ({state})" + (f": {noise}" if noise else "")
            )
        stdout.take()  # startup chatter such as "no job control in this shell"
        stderr.take()
        limit = self._process_limit()
        if limit is not None:
            members = await in_thread(scope.members)
            session.resting = len(members or [])
            session.watch_limit(sandbox.guard, limit)
        return session

    # --- running a command -----------------------------------------------------------------

    async def _run(self, session: ShellSession, command: str, timeout: float) -> ToolResult:
        token = secrets.token_hex(8)
        done = marker(token, "C")
        session.stdout.expect(done)
        session.stderr.expect(done)
        line = (
            f"eval {shlex.quote(command)} < /dev/null; __om_rc=$?; "
            + print_marker(token, "C", '"$__om_rc"', '"${!:-0}"')
            + '; __om_status "$__om_rc"\n'
        )
        await session.begin()
        try:
            try:
                session.send(line)
                state = await session.wait_for_markers(timeout, limit=True)
            except ConnectionResetError:
                state = "exited"
            if state == "done" and await session.settle(session.stderr.status):
                state = "processes"
            elif (
                state == "exited"
                and (self.box().exit_status(session.transport.get_returncode()) or 0) < 0
            ):
                # Killed: by the watchdog for the limit? The limit watch tells within a poll;
                # a loaded machine may delay the watch, so the guard's own count decides too.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(session.limit_hit.wait(), 3 * IDLE_POLL)
                if not session.limit_hit.is_set() and await session.pressure_changed():
                    session.limit_hit.set()
            if state == "processes" or session.limit_hit.is_set():
                await self._drop(session)
                note = (
                    f"The command was stopped: it reached the sandbox's limit of "
                    f"{self._process_limit()} processes at once (a fork bomb, or too many "
                    "processes in the background). The shell and everything it started were "
                    f"killed; the next command starts a new shell, {_RESTART_NOTE}."
                )
                return ToolFailure(error=self._with_output(note, session, token))
            if state == "done":
                return CLIResult(output=self._render(session, token, session.stdout.status))
            if state == "exited":
                return await self._after_exit(session, token)
            return await self._after_timeout(session, token, timeout)
        except asyncio.CancelledError:
            keep_partial_output(self._render(session, token, None))  # shown with the Stop
            # The command may still be running: start from a clean shell next time.
            await asyncio.shield(self._drop(session))
            raise
        finally:
            session.busy = False

    async def _drop(self, session: ShellSession) -> None:
        if self._session is session:
            self._session = None
        await session.close()

    async def _after_exit(self, session: ShellSession, token: str) -> ToolResult:
        await self._drop(session)
        status = describe_returncode(session.transport.get_returncode())
        text = self._render(session, token, None)
        if text.endswith("[stderr]\nexit"):  # what bash -i says when leaving
            text = text[: -len("[stderr]\nexit")].rstrip("\n")
        elif text.endswith("\nexit"):
            text = text[: -len("\nexit")]
        note = (
            f"[the shell exited ({status}); the next command starts a new shell, {_RESTART_NOTE}]"
        )
        return CLIResult(output=f"{text}\n{note}" if text else note)

    async def _after_timeout(self, session: ShellSession, token: str, timeout: float) -> ToolResult:
        seconds = format_seconds(timeout)
        recovered = marker(token, "R")
        session.stdout.expect(recovered)
        session.stderr.expect(recovered)
        session.scope.signal(signal.SIGINT)
        try:
            session.send(print_marker(token, "R", "$?") + "\n")
            state = await session.wait_for_markers(self.interrupt_grace)
        except ConnectionResetError:
            state = "exited"
        if state == "done":
            note = (
                f"The command timed out after {seconds} seconds and was interrupted (SIGINT). "
                "The shell is still running, with its working directory and environment."
            )
        else:
            await self._drop(session)
            note = (
                f"The command timed out after {seconds} seconds and the shell did not recover "
                "from the interrupt: it was killed and the next command starts a new shell, "
                f"{_RESTART_NOTE}."
            )
        return ToolFailure(error=self._with_output(note, session, token))

    def _with_output(self, note: str, session: ShellSession, token: str) -> str:
        text = self._render(session, token, None)
        return f"{note}\nOutput until then:\n{text}" if text else note

    def _render(self, session: ShellSession, token: str, status: int | None) -> str:
        out_text, err_text = compose_streams(
            session.stdout.take(), session.stderr.take(), self.max_output_chars
        )
        # A marker can only show up here after a race with an interrupt: never show it.
        leftover = re.compile(r"\n?__OM_" + token + r"_[A-Z]_-?\d+__\n?")
        out_text = leftover.sub("", out_text).rstrip("\n")
        err_text = _clean_stderr(leftover.sub("", err_text), token).strip("\n")
        parts: list[str] = []
        if out_text:
            parts.append(out_text)
        if err_text.strip():
            parts.append("[stderr]\n" + err_text)
        if status:
            parts.append(f"[exit code: {status}]")
        return "\n".join(parts)


_TCSETATTR_NOISE = re.compile(r"bash: \[\d+: \d+ \(\d+\)\] tcsetattr: .*")
_XTRACE = re.compile(r"\++ (.*)")


def _clean_stderr(text: str, token: str) -> str:
    """Drop what the shell says about our own plumbing rather than about the command.

    Without a terminal an interactive bash complains (tcsetattr) after a job dies of a
    signal, and under ``set -x`` it traces the marker commands that follow each command.
    """
    ours = re.compile(r"__om_rc=-?\d+|__om_status -?\d+|printf .*__OM _" + token + r"_[A-Z] \S+")
    kept: list[str] = []
    after_status = False
    for line in text.split("\n"):
        traced = _XTRACE.fullmatch(line)
        if traced is not None:
            body = traced.group(1)
            if ours.fullmatch(body):
                after_status = body.startswith("__om_status")
                continue
            if after_status and re.fullmatch(r"return -?\d+", body):
                after_status = False
                continue
        after_status = False
        if _TCSETATTR_NOISE.fullmatch(line):
            continue
        kept.append(line)
    return "\n".join(kept)


class _StartError(Exception):
    """bash could not be started; the message is meant for the model."""
