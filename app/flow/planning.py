"""``PlanningFlow``: one LLM call makes a plan, agents carry out its steps, the LLM sums up.

Where it differs from upstream (blocked steps and replans, a fresh run per step, the flow's
``timeout``, bounded plans and plan prompts) is told in docs/flows.md. Every iteration settles
one step (completed or blocked), so the flow always ends.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import time
from typing import Any

from pydantic import Field, model_validator

from app.agent.base import BaseAgent
from app.config import config
from app.events import PlanChange, PlanChanged, UsageReport
from app.exceptions import LLMError
from app.flow.base import BaseFlow
from app.flow.result import FlowResult, StepOutcome
from app.llm import LLM, model_argument
from app.llm.arguments import parse_arguments
from app.logger import logger
from app.prompt.planning import (
    AGENTS_PROMPT,
    CREATE_PLAN_PROMPT,
    DEFAULT_PLAN_STEPS,
    PLANNING_SYSTEM_PROMPT,
    REPLAN_PROMPT,
    STEP_PROMPT,
    SUMMARY_PROMPT,
    SUMMARY_SYSTEM_PROMPT,
)
from app.schema import AgentState, Message, ToolChoice
from app.tool.base import result_failed
from app.tool.planning import PlanningTool, PlanStepStatus, format_plan
from app.tool.tool_collection import call_tool

_TAG = re.compile(r"\[([A-Za-z][A-Za-z0-9_\- ]*)\]")
_COMPLETED = PlanStepStatus.COMPLETED.value
_BLOCKED = PlanStepStatus.BLOCKED.value
_IN_PROGRESS = PlanStepStatus.IN_PROGRESS.value
#: Default of ``[runflow] max_plan_prompt_chars`` (when no config is loaded).
DEFAULT_PLAN_PROMPT_CHARS = 8000


class PlanningFlow(BaseFlow):
    """Plans the task, runs each step on the agent it is tagged for, then summarizes.
    Upstream's keywords work: ``executors`` (``executor_keys``), ``plan_id`` (``active_plan_id``).
    """

    llm: LLM | None = Field(default=None, description="Plans and summarizes; default LLM()")
    planning_tool: PlanningTool = Field(default_factory=PlanningTool)
    executor_keys: list[str] = Field(default_factory=list)
    active_plan_id: str = Field(default_factory=lambda: f"plan_{int(time.time())}")
    current_step_index: int | None = None

    timeout: float | None = Field(default=None, gt=0, description="Seconds for the whole flow")
    step_timeout: float | None = Field(default=None, gt=0, description="Seconds per step")
    max_replans: int = Field(default=2, ge=0, description="Plan revisions after blocked steps")
    note_chars: int = Field(default=400, ge=40, description="Length of a step's result note")
    plan_prompt_chars: int | None = Field(
        default=None,
        ge=200,
        description="Characters of the plan in a step's prompt; None: [runflow] "
        "max_plan_prompt_chars",
    )

    def __init__(
        self, agents: BaseAgent | list[BaseAgent] | dict[str, BaseAgent], **data: Any
    ) -> None:
        if "executors" in data:
            data["executor_keys"] = data.pop("executors")
        if "plan_id" in data:
            data["active_plan_id"] = data.pop("plan_id")
        super().__init__(agents, **model_argument(data))

    @model_validator(mode="after")
    def _setup(self) -> PlanningFlow:
        if not self.executor_keys:
            self.executor_keys = list(self.agents)
        unknown = [key for key in self.executor_keys if key not in self.agents]
        if unknown:
            raise ValueError(f"executor_keys name unknown agents: {', '.join(unknown)}")
        if self.llm is None:
            self.llm = LLM()
        return self

    # ---- executor choice -----------------------------------------------------------------------

    def get_executor(self, step_type: str | None) -> BaseAgent:
        """The agent for a step tagged ``[step_type]`` (by key or agent name, any case);
        untagged or unknown tags go to the first executor."""
        if step_type:
            wanted = _norm(step_type)
            for key in self.executor_keys:
                if _norm(key) == wanted or _norm(self.agents[key].name) == wanted:
                    return self.agents[key]
            logger.warning(f"No agent for step tag [{step_type}]; using the first executor")
        return self.agents[self.executor_keys[0]]

    @staticmethod
    def step_tag(step: str) -> str | None:
        match = _TAG.search(step)
        return match.group(1).strip() if match else None

    # ---- the flow ------------------------------------------------------------------------------

    async def execute(self, input_text: str) -> FlowResult:
        """Plan ``input_text`` and work through it; empty text carries on the active plan
        (after Ctrl-C, whose cancellation leaves the running step ``in_progress``). LLM
        failures while planning end the flow with ``result.error``."""
        if not (input_text and input_text.strip()):
            if self.active_plan_id not in self.planning_tool.plans:
                raise ValueError("execute() needs a request, or an existing plan to carry on")
        elif self.active_plan_id in self.planning_tool.plans:
            self.active_plan_id = self._fresh_plan_id()

        outcomes: list[StepOutcome] = []
        summary = ""
        error: BaseException | None = None
        timed_out = False
        budget = asyncio.timeout(self.timeout)
        bus = self._events
        # Whoever watches the flow also sees its agents' work, for as long as the flow runs.
        forwards = (
            [a.events.subscribe(bus.emit) for a in self.agents.values()] if bus.active else []
        )
        try:
            async with budget:
                if input_text and input_text.strip():
                    await self._create_initial_plan(input_text.strip())
                await self._work_through_plan(outcomes)
                summary = await self._finalize_plan(input_text)
        except TimeoutError:
            if not budget.expired():
                raise
            timed_out = True
            logger.warning(f"The flow ran out of its time limit ({self.timeout:g} s)")
            await self._block_running_steps(
                f"stopped: the flow's time limit ({self.timeout:g} s) ran out", outcomes
            )
            summary = self._local_summary(f"The flow stopped after {self.timeout:g} s.")
        except LLMError as e:
            error = e
            logger.error(f"The planning flow failed: {e}")
            summary = self._local_summary(f"The flow stopped: {e}")
        except asyncio.CancelledError:
            # The running step stays in_progress: ``execute("")`` (``--resume``) carries it on.
            self.current_step_index = None
            raise
        finally:
            for unsubscribe in forwards:
                unsubscribe()
        if summary:
            await self._emit("summary", note=summary)
        parts = [o.output for o in outcomes if o.output] + [summary]
        return FlowResult(
            "\n".join(part for part in parts if part),
            summary=summary,
            plan_id=self.active_plan_id,
            plan=_copy_plan(self.planning_tool.plans.get(self.active_plan_id)),
            steps=outcomes,
            timed_out=timed_out,
            error=error,
        )

    # ---- planning ------------------------------------------------------------------------------

    async def _ask_planner(self, prompt: str, command: str, title: str | None = None) -> bool:
        """One LLM call offering only the planning tool; applies its first usable ``command``
        call to the active plan (True) or none (False)."""
        assert self.llm is not None
        started = time.monotonic()
        response = await self.llm.ask_tool(
            messages=[Message.user_message(prompt + self._agents_prompt())],
            system_msgs=[Message.system_message(PLANNING_SYSTEM_PROMPT)],
            tools=[self.planning_tool.to_param()],
            tool_choice=ToolChoice.AUTO,
        )
        await self._report_usage(time.monotonic() - started)
        for call in response.tool_calls or []:
            if call.function.name != self.planning_tool.name:
                continue
            try:
                args = dict(parse_arguments(call.function.arguments))
            except ValueError as e:
                raw = call.function.arguments
                logger.warning(f"Unreadable planning arguments ({e}): {raw!r}")
                continue
            if args.get("command") != command:
                if command == "update":
                    what = args.get("command")
                    logger.warning(f"Ignoring planning command {what!r} in a revision")
                continue
            args["plan_id"] = self.active_plan_id
            if title is not None:
                args.setdefault("title", title)
            result = await call_tool(self.planning_tool, args)
            if result_failed(result):
                what = "revised plan" if command == "update" else "model's plan"
                logger.warning(f"The {what} was not usable: {result}")
                continue
            return True
        return False

    async def _create_initial_plan(self, request: str) -> None:
        """The model's plan for ``request``; the default plan if it makes none."""
        prompt = CREATE_PLAN_PROMPT.format(request=request)
        await self._ask_planner(prompt, "create", _default_title(request))
        if self.active_plan_id not in self.planning_tool.plans:
            logger.warning("The model made no plan; using the default plan")
            await self.planning_tool.execute(
                command="create",
                plan_id=self.active_plan_id,
                title=_default_title(request),
                steps=list(DEFAULT_PLAN_STEPS),
            )
        steps = len(self.planning_tool.plans[self.active_plan_id]["steps"])
        logger.info(f"Plan '{self.active_plan_id}' ready with {steps} step(s)")
        logger.debug(f"Plan:\n{self._plan_text()}")
        await self._emit("plan_created")

    async def _replan(self, index: int, note: str) -> None:
        """Let the model revise the remaining steps after step ``index`` was blocked."""
        prompt = REPLAN_PROMPT.format(index=index, note=note, plan=self._plan_text())
        try:
            revised = await self._ask_planner(prompt, "update")
        except LLMError as e:
            logger.warning(f"Could not revise the plan ({e}); going on with it as it is")
            return
        if revised:
            logger.info("Plan revised after a blocked step")
            logger.debug(f"Plan:\n{self._plan_text()}")
            await self._emit("plan_updated")

    def _agents_prompt(self) -> str:
        if len(self.executor_keys) < 2:
            return ""
        lines = []
        for key in self.executor_keys:
            agent = self.agents[key]
            lines.append(f"- [{key.upper()}] ({agent.name}): {agent.description or ''}".rstrip())
        return AGENTS_PROMPT.format(agents="\n".join(lines), example=self.executor_keys[0].upper())

    # ---- steps ---------------------------------------------------------------------------------

    async def _work_through_plan(self, outcomes: list[StepOutcome]) -> None:
        replans_left = self.max_replans
        while (found := self._next_step()) is not None:
            index, step = found
            self.current_step_index = index
            executor = self.get_executor(self.step_tag(step))
            plan = self.planning_tool.plans[self.active_plan_id]
            carry_on = plan["step_statuses"][index] == _IN_PROGRESS  # cut short before
            self._mark(index, _IN_PROGRESS)
            where = {"step_index": index, "step": step, "agent": executor.name}
            await self._emit("step_started", **where, status=_IN_PROGRESS)
            outcome = await self._execute_step(executor, index, step, carry_on=carry_on)
            outcomes.append(outcome)
            self._mark(index, outcome.status, outcome.note)
            await self._emit("step_finished", **where, status=outcome.status, note=outcome.note)
            if not outcome.ok and replans_left > 0:
                replans_left -= 1
                await self._replan(index, outcome.note)
        self.current_step_index = None

    def _next_step(self) -> tuple[int, str] | None:
        plan = self.planning_tool.plans.get(self.active_plan_id)
        if plan is None:
            return None
        active = PlanStepStatus.get_active_statuses()
        for index, status in enumerate(plan["step_statuses"]):
            if status in active:
                return index, plan["steps"][index]
        return None

    async def _execute_step(
        self, executor: BaseAgent, index: int, step: str, *, carry_on: bool = False
    ) -> StepOutcome:
        """Run one step on a fresh run of ``executor``; classify how it ended. ``carry_on``:
        the step was cut short (Ctrl-C, a kill), so its agent's run goes on instead."""
        prompt = STEP_PROMPT.format(plan=self._plan_window(index), index=index, step=step)
        outcome = StepOutcome(index=index, step=step, agent=executor.name, status=_BLOCKED)
        logger.debug(f"Step {index} → {executor.name}: {step}")
        limit = asyncio.timeout(self.step_timeout)
        try:
            async with limit:
                if carry_on and executor.memory.messages:
                    result = await executor.resume()
                else:
                    result = await executor.run(prompt)
        except TimeoutError:
            if not limit.expired():
                raise
            outcome.note = f"did not finish within the step time limit ({self.step_timeout:g} s)"
            return outcome
        except Exception as e:  # a broken agent or tool must not end the flow
            logger.opt(exception=e).warning(f"Step {index} raised {type(e).__name__}")
            outcome.note = f"failed: {type(e).__name__}: {e}"
            return outcome

        answer = result.final_answer or ""
        outcome.steps_used = result.steps
        outcome.output = answer or str(result)
        if result.error is not None:
            outcome.note = f"failed: {result.error}"
        elif result.state != AgentState.FINISHED:
            outcome.note = f"stopped after {outcome.steps_used} steps without finishing" + (
                f"; last words: {self._clip(answer)}" if answer else ""
            )
        elif _reported_failure(executor):
            outcome.note = "the agent gave up" + (f": {self._clip(answer)}" if answer else "")
        else:
            outcome.status = _COMPLETED
            outcome.note = self._clip(answer) if answer else "done"
        return outcome

    def _mark(self, index: int, status: str, note: str | None = None) -> None:
        plan = self.planning_tool.plans[self.active_plan_id]
        plan["step_statuses"][index] = status
        if note is not None:
            plan["step_notes"][index] = note

    async def _block_running_steps(self, note: str, outcomes: list[StepOutcome]) -> None:
        self.current_step_index = None
        plan = self.planning_tool.plans.get(self.active_plan_id)
        if plan is None:
            return
        running = [i for i, status in enumerate(plan["step_statuses"]) if status == _IN_PROGRESS]
        for index in running:
            self._mark(index, _BLOCKED, note)
        for index in running:
            step = plan["steps"][index]
            agent = self.get_executor(self.step_tag(step)).name
            outcomes.append(StepOutcome(index, step, agent, _BLOCKED, note=note))
            where = {"step_index": index, "step": step, "agent": agent}
            await self._emit("step_finished", **where, status=_BLOCKED, note=note)

    # ---- summary -------------------------------------------------------------------------------

    async def _finalize_plan(self, request: str) -> str:
        """The model's summary of the outcome; a plain account if the model cannot be reached."""
        plan = self.planning_tool.plans.get(self.active_plan_id)
        if plan is None:
            return ""
        title = request.strip() or plan["title"]
        prompt = SUMMARY_PROMPT.format(request=title, plan=self._plan_text())
        assert self.llm is not None
        started = time.monotonic()
        try:
            summary = await self.llm.ask(
                [Message.user_message(prompt)],
                system_msgs=[Message.system_message(SUMMARY_SYSTEM_PROMPT)],
                stream=False,
            )
            await self._report_usage(time.monotonic() - started)
            return summary
        except LLMError as e:
            logger.warning(f"Could not get a summary from the model ({e})")
            return self._local_summary()

    def _local_summary(self, lead: str = "") -> str:
        plan = self.planning_tool.plans.get(self.active_plan_id)
        if plan is None:
            return lead or "No plan was made."
        statuses = plan["step_statuses"]
        lines = [lead] if lead else []
        lines.append(
            f"Plan '{plan['title']}': {statuses.count(_COMPLETED)} of {len(statuses)} "
            "steps completed."
        )
        for index, (step, status, note) in enumerate(
            zip(plan["steps"], statuses, plan["step_notes"], strict=True)
        ):
            if status != _COMPLETED:
                lines.append(f"- step {index} ({status}): {step}" + (f" — {note}" if note else ""))
        return "\n".join(lines)

    # ---- helpers -------------------------------------------------------------------------------

    def _plan_text(self) -> str:
        plan = self.planning_tool.plans.get(self.active_plan_id)
        return format_plan(plan) if plan is not None else "(no plan)"

    def _plan_window(self, focus: int) -> str:
        """The plan for step ``focus``'s prompt: whole when it fits ``plan_prompt_chars``,
        else the steps nearest the current one, the others counted by status."""
        plan = self.planning_tool.plans.get(self.active_plan_id)
        if plan is None:
            return "(no plan)"
        limit = self.plan_prompt_chars
        if limit is None:
            limit = DEFAULT_PLAN_PROMPT_CHARS
            if config.is_loaded:
                limit = config.app_config.run_flow_config.max_plan_prompt_chars
        text = format_plan(plan)
        return text if len(text) <= limit else plan_window(plan, focus, limit)

    def _clip(self, text: str) -> str:
        text = " ".join(text.split())
        limit = self.note_chars
        return text if len(text) <= limit else text[: limit - 1] + "…"

    def _fresh_plan_id(self) -> str:
        base = f"plan_{int(time.time())}"
        candidates = itertools.chain([base], (f"{base}_{n}" for n in itertools.count(2)))
        return next(c for c in candidates if c not in self.planning_tool.plans)

    async def _report_usage(self, seconds: float) -> None:
        """Tell the flow's listeners the tokens of the flow's own model call (planning or the
        summary): a trace shows it as a model call of the flow, the web UI adds its cost."""
        usage = self.llm.last_usage if self.llm is not None else None
        if usage is None or not self._events.active:
            return
        await self._events.emit(
            UsageReport(
                "flow",
                usage=usage.model_copy(),
                cost=usage.cost,
                model=self.llm.model if self.llm is not None else "",
                duration=seconds,
            )
        )

    async def _emit(self, change: PlanChange, **fields: Any) -> None:
        """Tell the flow's listeners (``flow.events``) how the plan changed; ``fields``: the
        ``PlanChanged`` fields of the step concerned (step_index, step, agent, status, note)."""
        bus = self._events
        if not bus.active:
            return
        plan = self.planning_tool.plans.get(self.active_plan_id)
        await bus.emit(
            PlanChanged(
                "flow",
                change=change,
                plan_id=self.active_plan_id,
                plan_text=self._plan_text(),
                total_steps=len(plan["steps"]) if plan else 0,
                **fields,
            )
        )


def plan_window(plan: dict[str, Any], focus: int, limit: int) -> str:
    """``format_plan`` cut to about ``limit`` characters around step ``focus``."""
    full = format_plan(plan).split("\nSteps:\n", 1)[0] + "\nSteps:"
    marks = PlanStepStatus.get_status_marks()
    steps, statuses, notes = plan["steps"], plan["step_statuses"], plan["step_notes"]

    def entry(i: int) -> str:
        line = f"{i}. {marks.get(statuses[i], '[ ]')} {steps[i]}"
        return line + (f"\n   Notes: {notes[i]}" if notes[i] else "")

    budget = limit - len(full) - 200  # room for the two "left out" lines
    first = last = min(max(focus, 0), len(steps) - 1)
    used = len(entry(first))
    while True:  # widen around the focus, after it first, while the budget lasts
        grown = False
        for i in (last + 1, first - 1):
            if 0 <= i < len(steps) and not (first <= i <= last):
                size = len(entry(i)) + 1
                if used + size > budget:
                    continue
                used += size
                first, last = min(first, i), max(last, i)
                grown = True
        if not grown:
            break
    lines = [full]
    if first > 0:
        lines.append(f"({first} earlier step(s) not shown: {_counts(statuses[:first])})")
    lines.extend(entry(i) for i in range(first, last + 1))
    if last < len(steps) - 1:
        rest = statuses[last + 1 :]
        lines.append(f"({len(rest)} later step(s) not shown: {_counts(rest)})")
    return "\n".join(lines)


def _counts(statuses: list[str]) -> str:
    counted = {s: statuses.count(s) for s in PlanStepStatus.get_all_statuses()}
    return ", ".join(f"{n} {s.replace('_', ' ')}" for s, n in counted.items() if n)


def _norm(name: str) -> str:
    return re.sub(r"[\s\-]+", "_", name.strip()).lower()


def _default_title(request: str) -> str:
    short = " ".join(request.split())
    return f"Plan for: {short[:50]}" + ("..." if len(short) > 50 else "")


def _copy_plan(plan: dict[str, Any] | None) -> dict[str, Any]:
    if plan is None:
        return {}
    return {key: list(value) if isinstance(value, list) else value for key, value in plan.items()}


def _reported_failure(agent: BaseAgent) -> bool:
    """True when the agent's last act was ``terminate`` with status ``failure``."""
    for message in reversed(agent.memory.messages):
        if message.role != "assistant":
            continue
        for call in message.tool_calls or []:
            if call.function.name == "terminate":
                try:
                    return parse_arguments(call.function.arguments).get("status") == "failure"
                except ValueError:
                    return False
        return False
    return False
