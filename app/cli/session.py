"""The terminal programs' sessions: the shared loop (``TerminalSession``: tasks from
``--prompt`` or stdin, Ctrl-C stops the task, twice quits) and what ``main.py``,
``run_flow.py`` and ``run_mcp.py`` run. Imported once the options are parsed, so ``--help``
costs no more than argparse.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from app.agent.base import BaseAgent
from app.agent.data_analysis import DataAnalysis
from app.agent.manus import Manus
from app.agent.mcp import MCPAgent
from app.agent.result import RunResult
from app.cli.common import (
    DEFAULT_URLS,
    EXIT_CONFIG,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_SESSION_BUSY,
    EXIT_SESSION_WRITE,
    EXIT_WORDS,
    answer,
    exit_code_for,
    say,
    silence_stdout,
    stdin_is_tty,
)
from app.cli.render import EventRenderer
from app.config import config
from app.events import EventBus
from app.exceptions import (
    ConfigError,
    MCPServerError,
    ReplayError,
    SessionBusyError,
    SessionError,
    SessionWriteError,
)
from app.flow.planning import PlanningFlow
from app.flow.result import FlowResult
from app.install_hint import pip_install
from app.llm.context import llm_scope
from app.llm.recording import recording, replaying
from app.llm.usage import Usage
from app.logger import define_log_level, logger
from app.redaction import redact_text
from app.session import SessionData, SessionRecorder, SessionStore
from app.tool.ask_human import StdinInputProvider, set_input_provider
from app.tool.chart.render import matplotlib_available
from app.tool.planning import PlanStepStatus

#: What stdin that ends before giving a task is told (exit code 2; nothing was set up).
NO_TASK = 'no task given: the input ended without one (or give it with -p "task")'


class TerminalSession(ABC):
    """One process: set-up, then tasks from ``--prompt`` or stdin, with Ctrl-C handling."""

    log_name = "openmanus"
    session_kind = "agent"
    exit_words: frozenset[str] = EXIT_WORDS
    banner = "OpenManus: type a task and press Enter; 'exit' or Ctrl-D to leave."

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.task: asyncio.Task[Any] | None = None
        self.main_task: asyncio.Task[Any] | None = None
        self.quitting = False
        self.reader: Any = None
        self.recorder: SessionRecorder | None = None
        self.task_usage: Usage | None = None
        self._untrace: Callable[[], None] | None = None
        self._greeted = False  # the banner is shown once, before the first prompt
        self._left = False  # the user typed an exit word (not: the input ended)

    @abstractmethod
    async def build(self) -> None:
        """Create the agents (or flow); ``ConfigError`` means exit code 2."""

    def agent_options(self, *, workspace: bool = True) -> dict[str, Any]:
        """The agent keyword arguments the shared options set: ``--max-steps`` and, unless the
        agent takes its workspace elsewhere, ``--workspace``."""
        options: dict[str, Any] = {}
        if self.args.max_steps is not None:
            options["max_steps"] = self.args.max_steps
        if workspace and self.args.workspace is not None:
            options["workspace"] = self.args.workspace
        return options

    @abstractmethod
    def start_task(self, prompt: str) -> Awaitable[Any]:
        """The awaitable that runs one task."""

    @abstractmethod
    def report(self, result: Any) -> int:
        """Print the task's answer and return its exit code."""

    @abstractmethod
    async def cleanup(self) -> None:
        """Release agents and tools at exit."""

    # ---- sessions (overridden by the programs) ---------------------------------------------------

    def event_bus(self) -> EventBus | None:
        """What the terminal view renders (the agent's or the flow's events)."""
        return None

    def attach_session(self, recorder: SessionRecorder, *, already_written: bool) -> None:
        """Let ``recorder`` record what runs the tasks."""
        return None

    def restore_session(self, data: SessionData) -> None:
        """Put the agents (and plan) back as the session file has them."""
        return None

    def continue_task(self) -> Awaitable[Any]:
        """The awaitable that carries on a task cut short in a resumed session."""
        raise NotImplementedError

    def session_header(self) -> dict[str, Any]:
        return {}

    # ---- signals -------------------------------------------------------------------------------

    def _on_sigint(self) -> None:
        if self.task is not None and not self.task.done() and not self.quitting:
            if self.task.cancelling():
                self._quit()  # second Ctrl-C while the task is still stopping
                return
            self.note("\n⏹  Stopping the task... (press Ctrl-C again to quit)")
            self.task.cancel()
            return
        self._quit()

    def _quit(self) -> None:
        self.quitting = True
        if self.task is not None and not self.task.done():
            self.task.cancel()
        if self.main_task is not None and not self.main_task.done():
            self.main_task.cancel()

    # ---- the program ---------------------------------------------------------------------------

    async def run(self) -> int:
        if getattr(self.args, "list_sessions", False):
            return self._list_sessions()
        if self.args.prompt is not None and not self.args.prompt.strip():
            say("error: the prompt is empty")  # before any set-up: nothing built, no session
            return EXIT_CONFIG
        self.main_task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signal.SIGINT, self._on_sigint)
            loop.add_signal_handler(signal.SIGTERM, self._quit)
        tape: contextlib.ExitStack = contextlib.ExitStack()
        try:
            try:
                self._setup()
                self._check_resume()
                first: str | None = None
                if self.args.prompt is None and not getattr(self.args, "resume", None):
                    # Read before anything is built: no task, no agent, no session file.
                    task = await self.first_task()
                    if isinstance(task, int):
                        return task
                    first = task
                self._start_tape(tape)
                await self.build()
                resumed = self._open_session()
                self._watch()
                self._trace()
            except (ConfigError, SessionError, ReplayError, MCPServerError) as e:
                say(f"error: {e}")
                if isinstance(e, SessionBusyError):
                    return EXIT_SESSION_BUSY
                # MCPServerError: run_mcp.py's server cannot be reached
                return EXIT_FAILED if isinstance(e, MCPServerError) else EXIT_CONFIG
            if resumed is not None and resumed.incomplete:
                self.note("Carrying on the task that was cut short...")
                code = await self._run_task(None, self.continue_task)
                if self.args.prompt is None:
                    return code
            elif resumed is not None and resumed.failed and self.args.prompt is None:
                self.note("Carrying on the task that failed...")
                code = await self._run_task(None, self.continue_task)
                if self.args.prompt is None:
                    return code
            if self.args.prompt is not None:  # not empty: checked above
                return await self._run_task(self.args.prompt)
            return await self._interactive(first)
        except asyncio.CancelledError:
            return EXIT_INTERRUPTED
        finally:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(self.cleanup(), timeout=10)
            if self.recorder is not None:
                with contextlib.suppress(Exception, asyncio.CancelledError):
                    await self.recorder.close()
            if self._untrace is not None:
                with contextlib.suppress(Exception, asyncio.CancelledError):
                    await self._stop_tracing()
            tape.close()
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(signal.SIGINT)
                loop.remove_signal_handler(signal.SIGTERM)

    # ---- reading tasks ---------------------------------------------------------------------------

    def note(self, message: str) -> None:
        """A progress line on stderr; ``--quiet`` hides it (only warnings, errors and the
        answer are shown then)."""
        if not self.args.quiet:
            say(message)

    async def first_task(self) -> str | int:
        """The first task from stdin, or the exit code when there is none: 0 when the user
        leaves a terminal (or types an exit word), 2 when the input ends without a task."""
        task = await self._read_task()
        if task is not None:
            return task
        if self._left or stdin_is_tty():
            self._goodbye()
            return EXIT_OK
        say(f"error: {NO_TASK}")
        return EXIT_CONFIG

    async def _read_task(self) -> str | None:
        """The next task typed, blank lines skipped; None at the end of the input or at an
        exit word."""
        tty = stdin_is_tty()
        if tty and not self._greeted:
            self._greeted = True
            self.note(self.banner)
        while True:
            line = await self.reader.read_line("\nEnter your prompt: " if tty else "")
            if line is None:
                return None
            text = line.strip()
            if text.lower() in self.exit_words:
                self._left = True
                return None
            if text:
                return text

    def _goodbye(self) -> None:
        if stdin_is_tty():
            self.note("Goodbye.")

    # ---- sessions, recording, the terminal view --------------------------------------------------

    def workspace(self) -> Path:
        """The directory the agents work in (sessions live in its ``.sessions``)."""
        if self.args.workspace is not None:
            return Path(self.args.workspace).expanduser().absolute()
        return config.workspace_root

    def _check_resume(self) -> None:
        """An unknown ``--resume`` id is an error before the agents (and MCP servers) are
        built, so a typo costs nothing and leaves no session file behind."""
        resume = getattr(self.args, "resume", None)
        if resume and not getattr(self.args, "no_session", False):
            SessionStore.for_workspace(self.workspace()).find(resume)

    def _list_sessions(self) -> int:
        if self.args.config is not None:
            with contextlib.suppress(ConfigError):
                config.load(self.args.config)
        store = SessionStore.for_workspace(self.workspace())
        try:
            infos = store.list(limit=20)
        except (SessionError, OSError) as e:
            say(f"error: {e}")
            return EXIT_CONFIG
        if not infos:
            say(f"No sessions in {store.directory}")
            return EXIT_OK
        try:
            for info in infos:
                when = time.strftime("%Y-%m-%d %H:%M", time.localtime(info.updated))
                prompt = " ".join(redact_text(info.first_prompt or "").split())  # then cut
                prompt = prompt if len(prompt) <= 60 else prompt[:59] + "…"
                damaged = f"  ({'; '.join(info.problems)})" if info.problems else ""
                print(
                    f"{info.id}  {when}  {info.kind:<5}  {info.state:<11}  {prompt}{damaged}",
                    flush=True,
                )
        except BrokenPipeError:  # `--list-sessions | head -1`: the reader has what it wanted
            silence_stdout()
        return EXIT_OK

    def _start_tape(self, stack: contextlib.ExitStack) -> None:
        """``--record``/``--replay``: every task (started from here) inherits the tape."""
        if getattr(self.args, "record", None):
            stack.enter_context(recording(self.args.record))
        elif getattr(self.args, "replay", None):
            stack.enter_context(replaying(self.args.replay, strict=bool(self.args.strict_replay)))

    def _open_session(self) -> SessionData | None:
        """Start (or, with ``--resume``, reopen and restore) the session file."""
        if getattr(self.args, "no_session", False):
            return None
        store = SessionStore.for_workspace(self.workspace())
        resume = getattr(self.args, "resume", None)
        if resume:
            data, self.recorder = store.resume(resume)  # locked until the program ends
            for problem in data.problems:
                say(f"warning: session {data.id}: {problem}")
            self.restore_session(data)
            self.attach_session(self.recorder, already_written=True)
            self.note(f"Resumed session {data.id} ({data.state}; {self.recorder.path})")
            return data
        try:
            self.recorder = store.start(
                self.session_kind,
                program=self.log_name,
                workspace=str(self.workspace()),
                **self.session_header(),
            )
        except (OSError, SessionWriteError) as e:  # nothing is lost yet: run without one
            say(f"warning: no session file ({e})")
            return None
        self.attach_session(self.recorder, already_written=False)
        self.note(f"Session {self.recorder.session_id} ({self.recorder.path})")
        return None

    def _watch(self) -> None:
        """Render progress from the events, unless ``--quiet``."""
        bus = self.event_bus()
        if bus is not None and not self.args.quiet:
            flow = self.session_kind == "flow"
            bus.subscribe(EventRenderer(show_source=flow, show_usage=bool(self.args.verbose)))

    def _trace(self) -> None:
        """Traces of the runs (``--trace`` or ``[tracing] enabled``; docs/tracing.md)."""
        if not (getattr(self.args, "trace", False) or config.tracing.enabled):
            return
        try:
            from app import tracing  # the optional otel extra: loaded only when tracing is on
        except ImportError as e:
            say(f"warning: no traces ({e.name} is missing): {pip_install('otel')}")
            return
        target = getattr(self, "flow", None) or getattr(self, "agent", None)
        self._untrace = tracing.trace(target if target is not None else self.event_bus())

    async def _stop_tracing(self) -> None:
        """End open spans and send the queued ones (waits at most ``export_timeout``)."""
        from app import tracing  # loaded already by _trace

        assert self._untrace is not None
        self._untrace()
        await asyncio.to_thread(tracing.shutdown)

    def _setup(self) -> None:
        level = "DEBUG" if self.args.verbose else "WARNING" if self.args.quiet else "INFO"
        log_dir = os.environ.get("OPENMANUS_LOG_DIR") or None
        define_log_level(
            print_level=level,
            name=self.log_name,
            compact=True,
            log_dir=Path(log_dir) if log_dir else None,
        )
        config.load(self.args.config)
        config.llm  # noqa: B018 - validate the LLM section now, with one clear message
        self.reader = StdinInputProvider()
        set_input_provider(self.reader)

    async def _run_task(
        self, prompt: str | None, start: Callable[[], Awaitable[Any]] | None = None
    ) -> int:
        """Run one task; returns its exit code. Ctrl-C cancels only this task."""
        if self.recorder is not None and prompt is not None:
            self.recorder.note("task", prompt=prompt)
            await self.recorder.flush()
        self.task_usage = Usage()  # every LLM call of the task, whichever agent made it
        with llm_scope(usage=self.task_usage):
            work = start() if start is not None else self.start_task(prompt or "")
            self.task = asyncio.ensure_future(work)
        try:
            result = await self.task
        except asyncio.CancelledError:
            if self.quitting:
                raise
            # Ctrl-C cancelled only the task; the session itself goes on.
            self.note("Task interrupted.")
            return EXIT_INTERRUPTED
        finally:
            self.task = None
        code = self.report(result)
        return self._session_failure() or code

    def _session_failure(self) -> int | None:
        """A failed session write is an error of the run (its history is incomplete)."""
        if self.recorder is None or self.recorder.error is None:
            return None
        say(f"error: {self.recorder.error}")
        return EXIT_SESSION_WRITE

    async def _interactive(self, first: str | None = None) -> int:
        """Tasks one per line until the input ends or an exit word; ``first`` was read already."""
        task = first
        while not self.quitting:
            if task is None:
                task = await self._read_task()
                if task is None:
                    break
            await self._run_task(task)
            task = None
        self._goodbye()
        if self.quitting:
            return EXIT_INTERRUPTED
        failed = self.recorder is not None and self.recorder.error is not None
        return EXIT_SESSION_WRITE if failed else EXIT_OK


class AgentSession(TerminalSession):
    """Manus answering one task after another, in one conversation."""

    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(args)
        self.agent: BaseAgent | None = None

    async def build(self) -> None:
        agent = await Manus.create(**self.agent_options())
        tools = ", ".join(agent.available_tools.tool_map)
        logger.info(f"{agent.name} ready (model {agent.llm.model}; tools: {tools})")
        self.agent = agent

    def start_task(self, prompt: str) -> Awaitable[Any]:
        assert self.agent is not None
        return self.agent.run(prompt)

    def event_bus(self) -> EventBus | None:
        return self.agent.events if self.agent is not None else None

    def session_header(self) -> dict[str, Any]:
        assert self.agent is not None
        return {"agents": {self.agent.name: self.agent.name}, "model": self.agent.llm.model}

    def attach_session(self, recorder: SessionRecorder, *, already_written: bool) -> None:
        assert self.agent is not None
        recorder.attach_agent(self.agent, already_written=already_written)

    def restore_session(self, data: SessionData) -> None:
        assert self.agent is not None
        data.restore_agent(self.agent, self.agent.name if self.agent.name in data.agents else None)
        if self.args.max_steps is not None:  # said again on resuming: it wins over the record
            self.agent.max_steps = self.args.max_steps

    def continue_task(self) -> Awaitable[Any]:
        assert self.agent is not None
        return self.agent.resume()

    def report(self, result: RunResult) -> int:
        """stdout gets the final answer of a completed run and nothing else (no step log);
        stderr gets the usage and, for a run that did not complete, why it stopped."""
        if result.ok and result.final_answer:
            answer(result.final_answer)
        elif result.ok:
            self.note("(the task finished without a written answer)")
        self.note(f"Tokens: {result.usage}")
        if not result.ok:
            say(f"error: {result.failure} (stop reason: {result.stop_reason})")
        return exit_code_for(result.stop_reason)

    async def cleanup(self) -> None:
        if self.agent is not None:
            await self.agent.cleanup()


class FlowSession(TerminalSession):
    """One planning flow per task; the agents (and their conversations) persist across tasks."""

    log_name = "openmanus_flow"
    session_kind = "flow"
    banner = "OpenManus flow: type a task and press Enter; 'exit' or Ctrl-D to leave."

    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(args)
        self.agents: dict[str, BaseAgent] = {}
        self.flow: PlanningFlow | None = None
        self.last_task: str | None = None  # of a resumed session

    async def build(self) -> None:
        kwargs = self.agent_options()
        self.agents["manus"] = await Manus.create(**kwargs)
        use_data = self.args.data_analysis
        if use_data is None:
            use_data = config.run_flow_config.use_data_analysis_agent
        if use_data:
            if not matplotlib_available():
                logger.warning(
                    "The data-analysis agent cannot draw charts without matplotlib "
                    "(pip install -e '.[data]')"
                )
            self.agents["data_analysis"] = DataAnalysis(**kwargs)
        self.flow = PlanningFlow(self.agents, timeout=self.args.timeout)
        logger.info(
            f"Planning flow ready with agents: {', '.join(a.name for a in self.agents.values())}"
        )

    def start_task(self, prompt: str) -> Awaitable[Any]:
        assert self.flow is not None
        return self.flow.execute(prompt)

    def event_bus(self) -> EventBus | None:
        return self.flow.events if self.flow is not None else None

    def session_header(self) -> dict[str, Any]:
        return {"agents": {key: agent.name for key, agent in self.agents.items()}}

    def attach_session(self, recorder: SessionRecorder, *, already_written: bool) -> None:
        assert self.flow is not None
        recorder.attach_flow(self.flow, already_written=already_written)

    def restore_session(self, data: SessionData) -> None:
        assert self.flow is not None
        data.restore_flow(self.flow)
        self.last_task = data.tasks[-1] if data.tasks else None
        if self.args.max_steps is not None:  # said again on resuming: it wins over the record
            for agent in self.agents.values():
                agent.max_steps = self.args.max_steps

    def continue_task(self) -> Awaitable[Any]:
        """Carry on the active plan; after a failure, its blocked steps are tried again (or,
        when planning failed, the task is planned again)."""
        assert self.flow is not None
        plan = self.flow.planning_tool.plans.get(self.flow.active_plan_id or "")
        if plan is None:
            return self.flow.execute(self.last_task or "")
        statuses = plan["step_statuses"]
        if not any(s in PlanStepStatus.get_active_statuses() for s in statuses):
            blocked, fresh = PlanStepStatus.BLOCKED.value, PlanStepStatus.NOT_STARTED.value
            statuses[:] = [fresh if s == blocked else s for s in statuses]
        return self.flow.execute("")

    def report(self, result: FlowResult) -> int:
        if result.summary:
            answer(result.summary)
        if self.task_usage is not None and self.task_usage.requests:
            self.note(f"Tokens: {self.task_usage}")
        if result.error is not None:
            say(f"error: {result.error}")
            return EXIT_FAILED
        if result.timed_out:
            say(f"error: the flow did not finish within {self.args.timeout:g} s")
            return EXIT_FAILED
        if not result.ok:
            blocked = [
                i for i, s in enumerate(result.plan.get("step_statuses", [])) if s != "completed"
            ]
            say(f"error: not every step was completed (blocked: {', '.join(map(str, blocked))})")
            return EXIT_FAILED
        return EXIT_OK

    async def cleanup(self) -> None:
        for agent in self.agents.values():
            await agent.cleanup()


class MCPSession(AgentSession):
    """``main.py``'s session with an ``MCPAgent`` instead of Manus."""

    exit_words = EXIT_WORDS | {"q"}
    banner = "OpenManus MCP agent: type a task and press Enter; 'q' or Ctrl-D to leave."

    async def build(self) -> None:
        # The workspace goes to the MCP server (below), not to the agent.
        agent = MCPAgent(**self.agent_options(workspace=False))
        self.agent = agent  # cleaned up by the session even if connecting fails half-way
        if self.args.connection == "stdio":
            server_args = ["-I", "-m", config.mcp_config.server_reference]  # isolated
            if config.config_path is not None:
                server_args += ["--config", str(config.config_path)]
            if self.args.workspace is not None:
                server_args += ["--workspace", str(self.args.workspace.resolve())]
            await agent.initialize(
                "stdio", command=sys.executable, args=server_args, inherit_env=True
            )
        else:
            url = self.args.server_url or DEFAULT_URLS[self.args.connection]
            await agent.initialize(self.args.connection, server_url=url)
        logger.info(
            f"{agent.name} ready (model {agent.llm.model}; "
            f"{len(agent.available_tools)} tools over {self.args.connection})"
        )

    async def first_task(self) -> str | int:
        if self.args.interactive:
            return await super().first_task()
        # Upstream's default mode: one task from stdin (blank is an empty task, as -p "").
        line = await self._read_line()
        if line is None:
            say(f"error: {NO_TASK}")
            return EXIT_CONFIG
        if not line.strip():
            say("error: the task is empty")
            return EXIT_CONFIG
        return line.strip()

    async def _interactive(self, first: str | None = None) -> int:
        if self.args.interactive:
            return await super()._interactive(first)
        if first is None:  # --resume without a task: one more from stdin, if there is one
            line = await self._read_line()
            if line is None or not line.strip():
                return EXIT_OK
            first = line.strip()
        return await self._run_task(first)

    async def _read_line(self) -> str | None:
        line: str | None = await self.reader.read_line(
            "Enter your request: " if stdin_is_tty() else ""
        )
        return line
