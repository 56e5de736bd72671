"""Running one task, start to finish, in its own workspace and its own agent instance.

This is the unit both backends schedule. Everything that can go wrong inside a task (bad
files, an unknown agent, an LLM failure, an exception escaping the agent, a hang past the
timeout) ends as that task's ``TaskResult``; only cancellation of the batch itself escapes.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import re
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.batch.agents import build_agent
from app.batch.flows import run_flow
from app.batch.models import FAILED, FINISHED, BatchTask, TaskResult
from app.batch.scoring import answers_match
from app.config import config
from app.llm.context import RequestGate, llm_scope
from app.llm.usage import Usage
from app.logger import logger
from app.session import SessionStore
from app.tool.ask_human import AskHuman, CallbackInputProvider

if TYPE_CHECKING:
    from app.agent.base import BaseAgent
    from app.session import SessionRecorder

DEFAULT_TIMEOUT = 600.0
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]")


@dataclass(frozen=True)
class ExecutionSettings:
    """What every task of a batch shares; plain data, so it travels to Ray workers."""

    workspace_root: Path
    timeout: float = DEFAULT_TIMEOUT
    max_steps: int | None = None
    input_price: float | None = None  # USD per million prompt tokens
    output_price: float | None = None  # USD per million completion tokens
    cleanup_timeout: float = 10.0

    def cost(self, usage: Usage) -> float | None:
        if self.input_price is None and self.output_price is None:
            return None
        prompt = usage.prompt_tokens * (self.input_price or 0.0)
        completion = usage.completion_tokens * (self.output_price or 0.0)
        return round((prompt + completion) / 1_000_000, 8)


def workspace_for(root: Path, task_id: str) -> Path:
    """The task's own directory: its id made safe for a file name (plus a hash if changed)."""
    safe = _SAFE_NAME.sub("_", task_id)[:80]
    if safe != task_id or safe in {".", ".."}:
        safe = f"{safe}-{hashlib.sha1(task_id.encode()).hexdigest()[:8]}"
    return root / safe


def _prepare_workspace(workspace: Path, files: dict[str, str]) -> None:
    """A fresh, empty directory (a rerun starts clean) holding the task's files."""
    if workspace.exists():
        shutil.rmtree(workspace)
    workspace.mkdir(parents=True)
    root = workspace.resolve()
    for dest, source in files.items():
        target = (root / dest).resolve()
        if target == root or not target.is_relative_to(root):
            raise ValueError(f"file destination {dest!r} leaves the task's workspace")
        src = Path(source)
        if not src.exists():
            raise ValueError(f"file {source} does not exist")
        target.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, target)
        else:
            shutil.copy2(src, target)


async def execute_task(
    task: BatchTask, settings: ExecutionSettings, gate: RequestGate | None = None
) -> TaskResult:
    """Run ``task`` and describe how it ended; never raises except on cancellation."""
    started_at = time.time()
    clock = time.monotonic()
    usage = Usage()
    workspace = workspace_for(settings.workspace_root, task.id)
    timeout = task.timeout or settings.timeout
    fields: dict[str, Any] = {}
    try:
        await asyncio.to_thread(_prepare_workspace, workspace, task.files)
    except (OSError, ValueError) as e:
        fields = {"state": "ERROR", "error": f"could not prepare the workspace: {e}"}
    else:
        recorder = _start_session(task, workspace)
        scope = asyncio.timeout(timeout)
        try:
            async with scope:
                with llm_scope(gate=gate, usage=usage):
                    fields = await _run(task, workspace, settings, recorder)
        except TimeoutError:
            if not scope.expired():
                raise
            fields = {"state": "TIMEOUT", "error": f"timed out after {timeout:g} s"}
        except (asyncio.CancelledError, KeyboardInterrupt, SystemExit):
            raise
        except BaseException as e:  # the agent itself broke: this task only
            logger.opt(exception=e).debug(f"task {task.id} crashed")
            fields = {"state": "CRASHED", "error": f"{type(e).__name__}: {e}"}
        finally:
            if recorder is not None:
                with contextlib.suppress(Exception):
                    await recorder.close()
        if recorder is not None:
            fields["session_file"] = str(recorder.path)
    return _result(task, settings, workspace, usage, started_at, clock, fields)


def _result(
    task: BatchTask,
    settings: ExecutionSettings,
    workspace: Path,
    usage: Usage,
    started_at: float,
    clock: float,
    fields: dict[str, Any],
) -> TaskResult:
    answer = fields.get("final_answer")
    correct = None
    if task.expected is not None:
        correct = answers_match(answer, task.expected, task.match)
    return TaskResult(
        id=task.id,
        status=FINISHED if fields.get("state") == "FINISHED" else FAILED,
        expected=task.expected,
        correct=correct,
        usage=usage.model_dump(
            include={"prompt_tokens", "completion_tokens", "total_tokens", "requests"}
        ),
        cost=settings.cost(usage) if settings.cost(usage) is not None else usage.cost,
        duration=round(time.monotonic() - clock, 4),
        started_at=started_at,
        agent=task.agent,
        flow=task.flow,
        workspace=str(workspace),
        **fields,
    )


def _start_session(task: BatchTask, workspace: Path) -> SessionRecorder | None:
    """The task's session file, in its workspace (None if it cannot be created)."""

    try:
        recorder = SessionStore.for_workspace(workspace).start(
            "flow" if task.flow else "agent", program="batch", task_id=task.id
        )
    except OSError as e:
        logger.warning(f"task {task.id}: no session file ({e})")
        return None
    recorder.note("task", prompt=task.prompt)
    return recorder


async def _run(
    task: BatchTask,
    workspace: Path,
    settings: ExecutionSettings,
    recorder: SessionRecorder | None = None,
) -> dict[str, Any]:
    agent = await build_agent(
        task.agent, workspace=workspace, max_steps=task.max_steps or settings.max_steps
    )
    _no_human(agent)
    try:
        with _traced(task) as watch:
            if task.flow:
                return await run_flow(task.flow, agent, task.prompt, recorder=recorder, watch=watch)
            if recorder is not None:
                recorder.attach_agent(agent)
            watch(agent)
            result = await agent.run(task.prompt)
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(agent.cleanup(), settings.cleanup_timeout)
    fields: dict[str, Any] = {
        "state": result.state.value,
        "final_answer": result.final_answer,
        "steps": result.steps,
    }
    if result.error is not None:
        fields["error"] = f"{type(result.error).__name__}: {result.error}"
    elif result.failure and result.stop_reason.value != "max_steps":  # stuck, empty, cut ...
        fields["error"] = result.failure
    elif result.state.value != "FINISHED":
        fields["error"] = f"stopped at max_steps ({result.steps}) without finishing"
    return fields


@contextlib.contextmanager
def _traced(task: BatchTask) -> Iterator[Callable[[Any], None]]:
    """With ``[tracing] enabled``: a span for the task, around the runs of what ``watch``
    is given (its agent, or its flow)."""
    if not (config.is_loaded and config.tracing.enabled):
        yield lambda target: None
        return
    from app import tracing  # the optional otel extra: loaded only when tracing is on

    stops: list[Callable[[], None]] = []
    attributes = {"openmanus.batch.task_id": task.id, "openmanus.batch.agent": task.agent or ""}
    with tracing.task_span(f"batch task {task.id}", attributes) as (parent, _span):
        try:
            yield lambda target: stops.append(tracing.trace(target, parent=parent))
        finally:
            for stop in stops:
                stop()


def _no_human(agent: BaseAgent) -> None:
    """Nobody watches a batch: ``ask_human`` tells the model to use its own judgement."""
    for tool in getattr(agent, "available_tools", None) or ():
        if isinstance(tool, AskHuman) and tool.input_provider is None:
            tool.input_provider = CallbackInputProvider(lambda question: None)
