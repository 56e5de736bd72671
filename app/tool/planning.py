"""``planning``: plans as numbered step lists with a status per step (upstream's commands,
text and plan dicts), bounded by ``[runflow] max_plan_steps`` / ``max_step_chars``: a plan is
shown in every step's prompt, so its size is paid many times."""

from __future__ import annotations

from enum import Enum
from typing import Any, ClassVar, Literal, get_args

from pydantic import Field, PrivateAttr

from app.config import config
from app.exceptions import ToolError
from app.tool.base import BaseTool, ToolResult
from app.tool.declared import ToolArgs

#: Defaults of ``[runflow] max_plan_steps`` and ``max_step_chars`` (when no config is loaded).
DEFAULT_MAX_PLAN_STEPS = 100
DEFAULT_MAX_STEP_CHARS = 1000

_Command = Literal["create", "update", "list", "get", "set_active", "mark_step", "delete"]
PLANNING_COMMANDS: tuple[str, ...] = get_args(_Command)


class PlanStepStatus(str, Enum):
    """Where a step stands, with the marker shown in the plan text."""

    NOT_STARTED = "not_started"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    BLOCKED = "blocked"

    @classmethod
    def get_all_statuses(cls) -> list[str]:
        return [status.value for status in cls]

    @classmethod
    def get_active_statuses(cls) -> list[str]:
        """Statuses of steps that still have to be worked on."""
        return [cls.NOT_STARTED.value, cls.IN_PROGRESS.value]

    @classmethod
    def get_status_marks(cls) -> dict[str, str]:
        return {
            cls.NOT_STARTED.value: "[ ]",
            cls.IN_PROGRESS.value: "[→]",
            cls.COMPLETED.value: "[✓]",
            cls.BLOCKED.value: "[!]",
        }


_DESCRIPTION = (
    "Keep a plan for a multi-step task and track its progress. Commands: `create` a plan "
    "(plan_id, title, steps), `update` its title or steps (unchanged steps keep their status), "
    "`list` all plans, `get` one plan (the active one by default), `set_active` a plan, "
    "`mark_step` a step's status and notes (step_index counts from 0), `delete` a plan."
)


def format_plan(plan: dict[str, Any]) -> str:
    """The plan as text: header, progress, status counts, then one marked line per step."""
    steps: list[str] = plan["steps"]
    statuses: list[str] = plan["step_statuses"]
    notes: list[str] = plan["step_notes"]
    header = f"Plan: {plan['title']} (ID: {plan['plan_id']})"
    counts = {status: statuses.count(status) for status in PlanStepStatus.get_all_statuses()}
    total = len(steps)
    done = counts[PlanStepStatus.COMPLETED.value]
    percent = done / total * 100 if total else 0.0
    marks = PlanStepStatus.get_status_marks()
    lines = [
        header,
        "=" * len(header),
        "",
        f"Progress: {done}/{total} steps completed ({percent:.1f}%)",
        f"Status: {done} completed, {counts['in_progress']} in progress, "
        f"{counts['blocked']} blocked, {counts['not_started']} not started",
        "",
        "Steps:",
    ]
    for index, (step, status, note) in enumerate(zip(steps, statuses, notes, strict=True)):
        lines.append(f"{index}. {marks.get(status, '[ ]')} {step}")
        if note:
            lines.append(f"   Notes: {note}")
    return "\n".join(lines)


class PlanningArgs(ToolArgs):
    closed_schema: ClassVar[bool] = True  # upstream's schema says additionalProperties: false

    command: _Command = Field(description="What to do.")
    plan_id: str | None = Field(
        None,
        description="The plan's identifier. Needed by create, update, set_active and delete; "
        "get and mark_step use the active plan without it.",
    )
    title: str | None = Field(None, description="The plan's title (create; optional for update).")
    steps: list[str] | None = Field(
        None, description="The steps in order (create; optional for update)."
    )
    step_index: int | None = Field(
        None, description="Which step to mark, counting from 0 (mark_step)."
    )
    step_status: Literal["not_started", "in_progress", "completed", "blocked"] | None = Field(
        None, description="The step's new status (mark_step)."
    )
    step_notes: str | None = Field(None, description="Notes to keep with the step (mark_step).")


class PlanningTool(BaseTool):
    """Creates and tracks plans; ``plans`` and ``_current_plan_id`` as upstream names them."""

    name: str = "planning"
    description: str = _DESCRIPTION
    Args: ClassVar[type[ToolArgs]] = PlanningArgs

    plans: dict[str, dict[str, Any]] = Field(default_factory=dict)
    #: Steps one plan may have (None: the config's ``[runflow] max_plan_steps``).
    max_steps: int | None = Field(default=None, ge=1)
    #: Characters of one step (None: the config's ``[runflow] max_step_chars``).
    max_step_chars: int | None = Field(default=None, ge=1)
    #: Characters of one step's notes; longer notes are cut with a marker.
    max_note_chars: int = Field(default=2000, ge=40)
    _current_plan_id: str | None = PrivateAttr(default=None)

    @property
    def current_plan_id(self) -> str | None:
        return self._current_plan_id

    async def execute(
        self,
        *,
        command: _Command,
        plan_id: str | None = None,
        title: str | None = None,
        steps: list[str] | None = None,
        step_index: int | None = None,
        step_status: str | None = None,
        step_notes: str | None = None,
    ) -> ToolResult:
        """Run one command (arguments already checked by ``PlanningArgs``); what is checked here
        is what a schema cannot say: which arguments a command needs, which plans exist."""
        if command == "list":
            return self._list()
        if command == "mark_step":
            return self._mark_step(plan_id, step_index, step_status, step_notes)
        if command in ("create", "update"):
            return getattr(self, f"_{command}")(plan_id, title, steps)
        if command not in ("get", "set_active", "delete"):  # a Python caller's typo
            raise ToolError(f"Unknown command {command!r}: use one of {PLANNING_COMMANDS}.")
        return getattr(self, f"_{command}")(plan_id)

    def _create(self, plan_id: str | None, title: str | None, steps: Any) -> ToolResult:
        plan_id = _require_id(plan_id, "create")
        if plan_id in self.plans:
            raise ToolError(
                f"A plan with ID '{plan_id}' already exists. Use `update` to change it, "
                "or choose another plan_id."
            )
        if not isinstance(title, str) or not title.strip():
            raise ToolError("`title` is required for command `create`.")
        clean = self._check_steps(steps, "create")
        self.plans[plan_id] = {
            "plan_id": plan_id,
            "title": title.strip(),
            "steps": clean,
            "step_statuses": [PlanStepStatus.NOT_STARTED.value] * len(clean),
            "step_notes": [""] * len(clean),
        }
        self._current_plan_id = plan_id
        return ToolResult(
            output=f"Plan created successfully with ID: {plan_id}\n\n"
            + format_plan(self.plans[plan_id])
        )

    def _update(self, plan_id: str | None, title: str | None, steps: Any) -> ToolResult:
        plan = self._plan(_require_id(plan_id, "update"))
        if title is not None:
            if not isinstance(title, str) or not title.strip():
                raise ToolError("`title` must be a non-empty string.")
            plan["title"] = title.strip()
        if steps is not None:
            clean = self._check_steps(steps, "update")
            # A step that is unchanged at its position keeps its status and notes.
            old = list(zip(plan["steps"], plan["step_statuses"], plan["step_notes"], strict=False))
            fresh = (PlanStepStatus.NOT_STARTED.value, "")
            kept = [
                old[i][1:] if i < len(old) and old[i][0] == step else fresh
                for i, step in enumerate(clean)
            ]
            plan.update(
                steps=clean, step_statuses=[k[0] for k in kept], step_notes=[k[1] for k in kept]
            )
        return ToolResult(
            output=f"Plan updated successfully: {plan['plan_id']}\n\n" + format_plan(plan)
        )

    def _list(self) -> ToolResult:
        if not self.plans:
            return ToolResult(output="No plans available. Create a plan with the 'create' command.")
        lines = ["Available plans:"]
        for plan_id, plan in self.plans.items():
            active = " (active)" if plan_id == self._current_plan_id else ""
            done = plan["step_statuses"].count(PlanStepStatus.COMPLETED.value)
            total = len(plan["steps"])
            lines.append(f"• {plan_id}{active}: {plan['title']} - {done}/{total} steps completed")
        return ToolResult(output="\n".join(lines))

    def _get(self, plan_id: str | None) -> ToolResult:
        return ToolResult(output=format_plan(self._plan(self._id_or_active(plan_id))))

    def _set_active(self, plan_id: str | None) -> ToolResult:
        plan = self._plan(_require_id(plan_id, "set_active"))
        self._current_plan_id = plan["plan_id"]
        return ToolResult(
            output=f"Plan '{plan['plan_id']}' is now the active plan.\n\n" + format_plan(plan)
        )

    def _mark_step(
        self,
        plan_id: str | None,
        step_index: int | None,
        step_status: str | None,
        step_notes: str | None,
    ) -> ToolResult:
        plan = self._plan(self._id_or_active(plan_id))
        if step_index is None:
            raise ToolError("`step_index` is required for command `mark_step`.")
        count = len(plan["steps"])
        if not 0 <= step_index < count:
            raise ToolError(
                f"step_index {step_index} is out of range: plan '{plan['plan_id']}' has "
                f"{count} step(s), numbered 0 to {count - 1}."
            )
        if step_status is not None:
            plan["step_statuses"][step_index] = step_status
        if step_notes is not None:
            limit = self.max_note_chars
            if len(step_notes) > limit:
                step_notes = step_notes[:limit] + f"… [notes cut: {len(step_notes)} characters]"
            plan["step_notes"][step_index] = step_notes
        return ToolResult(
            output=f"Step {step_index} updated in plan '{plan['plan_id']}'.\n\n" + format_plan(plan)
        )

    def _delete(self, plan_id: str | None) -> ToolResult:
        plan = self._plan(_require_id(plan_id, "delete"))
        del self.plans[plan["plan_id"]]
        if self._current_plan_id == plan["plan_id"]:
            self._current_plan_id = None
        return ToolResult(output=f"Plan '{plan['plan_id']}' has been deleted.")

    def limits(self) -> tuple[int, int]:
        """(steps per plan, characters per step): the fields, else ``[runflow]``'s."""
        steps, chars = DEFAULT_MAX_PLAN_STEPS, DEFAULT_MAX_STEP_CHARS
        if config.is_loaded:
            runflow = config.app_config.run_flow_config
            steps, chars = runflow.max_plan_steps, runflow.max_step_chars
        return (
            steps if self.max_steps is None else self.max_steps,
            chars if self.max_step_chars is None else self.max_step_chars,
        )

    def _check_steps(self, steps: Any, command: str) -> list[str]:
        if steps is None:
            raise ToolError(f"`steps` is required for command `{command}`: a list of step texts.")
        clean = [step.strip() for step in steps]
        if not clean or not all(clean):
            raise ToolError("`steps` must contain at least one step, and no step may be empty.")
        max_steps, max_chars = self.limits()
        if len(clean) > max_steps:
            raise ToolError(
                f"The plan has {len(clean)} steps; at most {max_steps} are allowed "
                "(max_plan_steps). Merge steps into larger ones and send the plan again."
            )
        long = [i for i, step in enumerate(clean) if len(step) > max_chars]
        if long:
            shown = ", ".join(str(i) for i in long[:10]) + (" ..." if len(long) > 10 else "")
            raise ToolError(
                f"{len(long)} step(s) are longer than {max_chars} characters (max_step_chars): "
                f"step(s) {shown}. Keep each step to a short instruction and send the plan again."
            )
        return clean

    def _plan(self, plan_id: str) -> dict[str, Any]:
        plan = self.plans.get(plan_id)
        if plan is None:
            known = ", ".join(self.plans) or "none"
            raise ToolError(f"No plan with ID '{plan_id}'. Known plans: {known}.")
        return plan

    def _id_or_active(self, plan_id: str | None) -> str:
        if plan_id is not None:
            return _require_id(plan_id, "this command")
        if self._current_plan_id is None:
            raise ToolError("No active plan. Give a plan_id or create a plan first.")
        return self._current_plan_id


def _require_id(plan_id: Any, command: str) -> str:
    if not isinstance(plan_id, str) or not plan_id.strip():
        raise ToolError(f"`plan_id` is required for command `{command}`.")
    return plan_id.strip()
