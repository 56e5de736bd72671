"""One web session: its agent (or planning flow), workspace, event log, questions and task.

Sessions share the server's event loop but not agents or files: each has ``<workspace>/web/<id>/``
and a session file in ``<workspace>/web/.sessions/`` (out of every model's reach) from which it
can be reopened after a restart. Stopping a task is Ctrl-C: cancelled, tools cleaned up, the
session still usable.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import secrets
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from app.agent.data_analysis import DataAnalysis
from app.agent.manus import Manus
from app.config import config
from app.events import (
    Event,
    PlanChanged,
    RunStarted,
    TextDelta,
    ToolCallEvent,
    ToolResultEvent,
    UsageReport,
)
from app.exceptions import SessionBusyError
from app.flow.planning import PlanningFlow
from app.llm.context import llm_scope
from app.llm.usage import Usage
from app.logger import logger
from app.redaction import EventRedactor
from app.tool.ask_human import CallbackInputProvider
from app.web.eventlog import EventLog, decode_image, redact_tree, render_event

if TYPE_CHECKING:
    from app.agent.base import BaseAgent
    from app.session import SessionData, SessionRecorder

Mode = Literal["agent", "flow"]


class WebSession:
    """A session as the server holds it while it is open."""

    def __init__(
        self, session_id: str, mode: Mode, workspace: Path, *, options: dict[str, Any]
    ) -> None:
        self.id = session_id
        self.mode: Mode = mode
        self.workspace = workspace
        self.options = options
        self.log = EventLog()
        #: Streamed text redacted as a whole (the log redacts every entry it is given).
        self._streams = EventRedactor(TextDelta, fields=False)
        self.agent: BaseAgent | None = None
        self.agents: dict[str, BaseAgent] = {}
        self.flow: PlanningFlow | None = None
        self.recorder: SessionRecorder | None = None
        self.runner: asyncio.Task[None] | None = None
        self._work: asyncio.Future[Any] | None = None
        self._stopping = False
        self.questions: dict[str, tuple[str, asyncio.Future[str | None]]] = {}
        self.title = ""
        self.created = time.time()
        self.state = "idle"
        self.incomplete = False
        self.task_usage: Usage | None = None
        self.task_cost: float | None = None
        self.screenshot: bytes | None = None
        self.screenshots = 0
        #: Agent runs so far (history included): each entry carries ``run``, so the page keys
        #: a message by (run, agent, step) and steps restarting in a new run never collide.
        self.runs = 0
        #: The browser's interactive elements as last read, to name the element a call used.
        self.browser_elements = ""
        self.model = ""
        self.profile = ""

    # ---- building ----------------------------------------------------------------------------

    async def build(self) -> None:
        """Create the agent (or the flow and its agents), answering questions through us."""

        self.workspace.mkdir(parents=True, exist_ok=True)
        kwargs: dict[str, Any] = {"workspace": self.workspace}
        if self.options.get("max_steps"):
            kwargs["max_steps"] = self.options["max_steps"]
        manus = await Manus.create(**kwargs)
        self.agents = {"manus": manus}
        if self.mode == "flow":
            if self.options.get("data_analysis"):
                self.agents["data_analysis"] = DataAnalysis(**kwargs)
            flow = PlanningFlow(self.agents, timeout=self.options.get("flow_timeout", 3600.0))
            self.flow = flow
            flow.events.subscribe(self._on_event)
        else:
            self.agent = manus
            manus.events.subscribe(self._on_event)
        # ask_human's questions go to the page; its answers come back through ``answer``.
        provider = CallbackInputProvider(self.ask)
        for agent in self.agents.values():
            tools = getattr(agent, "available_tools", None)
            tool = tools.tool_map.get("ask_human") if tools is not None else None
            if tool is not None:
                tool.input_provider = provider
            helper = getattr(agent, "_browser_helper", None)
            if helper is not None and hasattr(helper, "on_state"):
                helper.on_state = self._on_browser_state
        if manus.llm is not None:
            self.model = manus.llm.model
            name = manus.llm.config_name
            self.profile = name if config.is_loaded and name in config.llm else "default"

    def attach(self, recorder: SessionRecorder, *, already_written: bool) -> None:
        self.recorder = recorder
        if self.flow is not None:
            recorder.attach_flow(self.flow, already_written=already_written)
        elif self.agent is not None:
            recorder.attach_agent(self.agent, already_written=already_written)

    def restore(self, data: SessionData) -> None:
        """Agents (and plan) as the session file has them; the page gets the old history."""
        if self.flow is not None:
            data.restore_flow(self.flow)
        elif self.agent is not None:
            key = self.agent.name if self.agent.name in data.agents else None
            data.restore_agent(self.agent, key)
        self.title = data.first_prompt or ""
        self.created = float(data.header.get("created") or self.created)
        self.incomplete = data.incomplete
        self.state = "incomplete" if data.incomplete else data.state

    # ---- events ------------------------------------------------------------------------------

    def _on_event(self, event: Event) -> None:
        for outward in self._streams(event):
            self._log_event(outward)

    def _log_event(self, event: Event) -> None:
        plan = None
        if isinstance(event, PlanChanged) and self.flow is not None:
            plan = self.flow.planning_tool.plans.get(event.plan_id)
        if isinstance(event, RunStarted):
            self.runs += 1
        entry = render_event(event, plan)
        entry["run"] = self.runs
        if isinstance(event, ToolCallEvent) and event.name == "browser_use":
            element = _element_of(event.arguments, self.browser_elements)
            if element:
                entry["element"] = element
        if isinstance(event, UsageReport):
            if event.cost is not None:
                self.task_cost = (self.task_cost or 0.0) + event.cost
            entry["task_usage"] = (
                self.task_usage.model_dump() if self.task_usage is not None else None
            )
            entry["task_cost"] = self.task_cost
        self.log.append(entry)
        if isinstance(event, ToolResultEvent):
            image = decode_image(event.image)
            if image:
                self.screenshot = image
                self.screenshots += 1
                shot = {"kind": "screenshot", "n": self.screenshots, "call_id": event.call_id}
                self.log.append({**shot, "source": event.source, "run": self.runs})

    def _on_browser_state(self, state: dict[str, Any], image: str | None) -> None:
        """The browser state an agent read before its step: the page's live view (the
        screenshot, its address and title) follows the agent as it acts."""
        elements = state.get("interactive_elements")
        self.browser_elements = elements if isinstance(elements, str) else ""
        picture = decode_image(image)
        if picture:
            self.screenshot = picture
            self.screenshots += 1
        url, title = str(state.get("url") or ""), str(state.get("title") or "")
        shot = {"kind": "screenshot", "n": self.screenshots if picture else None, "url": url}
        self.log.append({**shot, "title": title, "run": self.runs})

    def note(self, kind: str, **fields: Any) -> dict[str, Any]:
        """A web entry of our own (task started/finished, questions), redacted."""
        return self.log.append({"kind": kind, **fields})

    # ---- questions ---------------------------------------------------------------------------

    async def ask(self, question: str) -> str | None:
        qid = secrets.token_hex(6)
        future: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        self.questions[qid] = (question, future)
        self.note("question", question_id=qid, question=question)
        try:
            return await future
        finally:
            self.questions.pop(qid, None)
            self.note("question_closed", question_id=qid)

    def answer(self, question_id: str, text: str) -> bool:
        """Deliver the page's answer; False when no such question is waiting."""
        pending = self.questions.get(question_id)
        if pending is None or pending[1].done():
            return False
        pending[1].set_result(text)
        return True

    # ---- tasks -------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self.runner is not None and not self.runner.done()

    def start(self, prompt: str | None) -> None:
        """Start a task (``prompt``) or carry on the cut-off one (None); SessionBusyError if one
        is running."""
        if self.running:
            raise SessionBusyError(
                f"Session {self.id} is already running a task; stop it first "
                "or wait for it to finish."
            )
        if prompt is not None and not self.title:
            self.title = prompt
        self.state = "running"  # at once: a listing asked before the task's first step agrees
        self.runner = asyncio.create_task(self._run(prompt), name=f"web-task-{self.id}")

    async def _run(self, prompt: str | None) -> None:
        self.state = "running"
        self._stopping = False
        self.task_usage, self.task_cost = Usage(), None
        self.note(
            "task_started",
            prompt=prompt,
            resumed=prompt is None,
            mode=self.mode,
            model=self.model,
            profile=self.profile,
        )
        if self.recorder is not None and prompt is not None:
            self.recorder.note("task", prompt=prompt)
            await self.recorder.flush()
        with llm_scope(usage=self.task_usage):
            self._work = asyncio.ensure_future(self._start_work(prompt))
        outcome: dict[str, Any]
        try:
            result = await self._work
        except asyncio.CancelledError:
            if not self._stopping:
                self._finish(
                    {"ok": False, "stopped": True, "failure": "the server is shutting down"},
                    "stopped",
                )
                raise
            outcome = {"ok": False, "stopped": True, "failure": "stopped by the user"}
            state = "stopped"
        except Exception as e:  # a bug or misuse: report it, keep the session
            logger.exception(f"web session {self.id}: the task failed")
            outcome, state = {"ok": False, "failure": f"{type(e).__name__}: {e}"}, "failed"
        else:
            outcome, state = self._outcome(result)
        finally:
            self._work = None
        self._finish(outcome, state)

    def _start_work(self, prompt: str | None) -> Any:
        if self.flow is not None:
            return self.flow.execute(prompt if prompt is not None else "")
        assert self.agent is not None
        return self.agent.run(prompt) if prompt is not None else self.agent.resume()

    def _outcome(self, result: Any) -> tuple[dict[str, Any], str]:
        state = "finished" if result.ok else "failed"
        if self.flow is None:
            failure, reason = result.failure, str(result.stop_reason)
            outcome = {"ok": result.ok, "final_answer": result.final_answer, "failure": failure}
            return {**outcome, "stop_reason": reason}, state
        failure = None
        if result.error is not None:
            failure = str(result.error)
        elif result.timed_out:
            failure = "the flow did not finish in time"
        elif not result.ok:
            failure = "not every step of the plan was completed"
        return {"ok": result.ok, "final_answer": result.summary, "failure": failure}, state

    def _finish(self, outcome: dict[str, Any], state: str) -> None:
        self.state = state
        self.incomplete = False
        usage = self.task_usage.model_dump() if self.task_usage is not None else None
        if self.task_cost is None and self.task_usage is not None:
            self.task_cost = self.task_usage.cost
        self.note("task_finished", usage=usage, cost=self.task_cost, state=state, **outcome)

    async def stop(self) -> bool:
        """Stop the running task as Ctrl-C does; returns once it has wound down (False when
        nothing was running)."""
        work, runner = self._work, self.runner
        if runner is None or runner.done():
            return False
        self._stopping = True
        for _, future in list(self.questions.values()):
            future.cancel()
        if work is not None and not work.done():
            work.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await asyncio.shield(runner)
        return True

    async def close(self) -> None:
        """Stop any task, release the agents' tools and the session file's lock."""
        runner = self.runner
        if runner is not None and not runner.done():
            runner.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await runner
        for agent in self.agents.values():
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(agent.cleanup(), timeout=10)
        if self.recorder is not None:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await self.recorder.close()
        self.log.close()

    # ---- views -------------------------------------------------------------------------------

    def info(self) -> dict[str, Any]:
        return redact_tree(
            {
                "id": self.id,
                "mode": self.mode,
                "title": self.title,
                "state": self.state,
                # Not running once the task's end is told (its task may still be returning).
                "running": self.running and self.state == "running",
                "incomplete": self.incomplete,
                "live": True,
                "created": self.created,
                "model": self.model,
                "profile": self.profile,
                "questions": [
                    {"question_id": qid, "question": q} for qid, (q, _) in self.questions.items()
                ],
            }
        )


_INDEX = re.compile(r"^\s*\*?\[(\d+)\]")


def _element_of(arguments: str, elements: str) -> str | None:
    """How the browser state described the element a browser call names by ``index``
    (e.g. ``[3]<button>Buy now``), so the page can say what the agent clicked."""
    try:
        args = json.loads(arguments)
    except (ValueError, RecursionError):
        return None
    index = args.get("index") if isinstance(args, dict) else None
    if not isinstance(index, int) or isinstance(index, bool) or not elements:
        return None
    lines = elements.splitlines()
    for i, line in enumerate(lines):
        found = _INDEX.match(line)
        if found and int(found.group(1)) == index:
            text = line.strip()
            following = lines[i + 1].strip() if i + 1 < len(lines) else ""
            if following and not _INDEX.match(following) and not following.startswith("<"):
                text += " " + following
            return text[:300]
    return f"element {index}"


def history_entries(raw: bytes, mode: str) -> list[dict[str, Any]]:
    """The page's view of a session file's past tasks (tasks, events, results); entries
    carry ``run`` (the agent run they belong to) as live ones do."""
    entries: list[dict[str, Any]] = []

    def past(kind: str, **fields: Any) -> None:
        entries.append({"kind": kind, **fields, "history": True})

    run = 0
    for line in raw.decode("utf-8", "replace").splitlines():
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):  # a damaged line: skipped, as --resume does
            continue
        if not isinstance(record, dict):
            continue
        kind = record.get("type")
        if kind == "run_started":
            run += 1
            past("run_started", run=run)
        elif kind == "task":
            past("task_started", prompt=record.get("prompt"))
        elif kind == "event" and isinstance(record.get("event"), dict):
            entries.append({**record["event"], "run": run, "history": True})
        elif kind == "plan" and isinstance(record.get("plans"), dict):
            plan = record["plans"].get(str(record.get("active_plan_id")))
            if isinstance(plan, dict):
                keys = ("title", "steps", "step_statuses", "step_notes")
                past("plan", change=record.get("change"), plan={k: plan.get(k) for k in keys})
        elif kind == "run_finished" and mode != "flow":
            ok = record.get("state") == "FINISHED"
            failure = None if ok else f"the run ended {record.get('state')}"
            past("task_finished", ok=ok, final_answer=record.get("final_answer"), failure=failure)
        elif kind == "flow_finished":
            past("task_finished", ok=True, final_answer=record.get("summary"))
    shown = []
    for entry in entries:
        try:
            shown.append(redact_tree(entry))
        except RecursionError:  # nested beyond reason (a damaged line): left out
            continue
    return shown
