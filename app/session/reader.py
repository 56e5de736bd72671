"""Reading a session file back: tolerant of a cut-off last line, and of damage elsewhere.

A process killed while writing leaves a partial last line; it is skipped and reported. A
damaged line in the middle is skipped and reported too, so one bad line never loses a whole
session. What comes out is the state at the last checkpoint: each agent's memory, step count,
usage and whether its run was cut short, plus a flow's plans.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.exceptions import SessionError

if TYPE_CHECKING:
    from app.agent.base import BaseAgent

__all__ = ["AgentSnapshot", "SessionData", "read_session"]

_MESSAGE_FIELDS = ("role", "content", "tool_calls", "name", "tool_call_id")


@dataclass
class AgentSnapshot:
    """One agent as of its last checkpoint."""

    key: str
    name: str = ""
    messages: list[dict[str, Any]] = field(default_factory=list)
    step: int = 0
    max_steps: int = 0
    state: str = "IDLE"
    usage: dict[str, Any] | None = None
    running: bool = False  # a run started and never finished (crash, kill, Ctrl-C)
    last_prompt: str | None = None


@dataclass
class SessionData:
    """A session as read from its file."""

    id: str
    path: Path
    header: dict[str, Any]
    agents: dict[str, AgentSnapshot] = field(default_factory=dict)
    tasks: list[str] = field(default_factory=list)
    plans: dict[str, dict[str, Any]] = field(default_factory=dict)
    active_plan_id: str | None = None
    flow_finished: bool = True
    problems: list[str] = field(default_factory=list)
    records: int = 0
    updated: float = 0.0
    #: Why records were lost when a write failed (disk full...), else None.
    write_failed: str | None = None

    @property
    def kind(self) -> str:
        return str(self.header.get("kind", "agent"))

    @property
    def first_prompt(self) -> str | None:
        if self.tasks:
            return self.tasks[0]
        for snapshot in self.agents.values():
            for message in snapshot.messages:
                if message.get("role") == "user":
                    return message.get("content")
        return None

    @property
    def incomplete(self) -> bool:
        """Whether the last task was cut short and can be carried on."""
        if self.kind == "flow":
            return not self.flow_finished and self.active_plan_id in self.plans
        return any(snapshot.running for snapshot in self.agents.values())

    @property
    def state(self) -> str:
        """``incomplete``, ``finished``, ``failed``, ``stopped`` (max steps) or ``empty``;
        a session whose writing failed is ``incomplete`` whatever its records say."""
        if self.incomplete or self.write_failed is not None:
            return "incomplete"
        if self.kind == "flow":
            plan = self.plans.get(self.active_plan_id or "")
            if plan is None:
                return "empty"
            statuses = plan.get("step_statuses", [])
            return "finished" if statuses and all(s == "completed" for s in statuses) else "failed"
        states = [s.state for s in self.agents.values() if s.messages]
        if not states:
            return "empty"
        last = states[-1]
        return {"FINISHED": "finished", "ERROR": "failed"}.get(last, "stopped")

    def snapshot(self, key: str | None = None) -> AgentSnapshot | None:
        if key is not None:
            return self.agents.get(key)
        return next(iter(self.agents.values()), None)

    def restore_agent(self, agent: BaseAgent, key: str | None = None) -> AgentSnapshot | None:
        """Put ``agent`` back as it was at the last checkpoint: memory, step count (of a cut-off
        run) and usage. Returns the snapshot used (None when the session has none)."""
        from app.llm.usage import Usage
        from app.schema import AgentState, Message

        snapshot = self.snapshot(key)
        if snapshot is None:
            return None
        agent.memory.messages = [
            Message(**{k: v for k, v in data.items() if k in _MESSAGE_FIELDS})
            for data in snapshot.messages
        ]
        agent.state = AgentState.IDLE
        agent.current_step = snapshot.step if snapshot.running else 0
        if snapshot.max_steps and snapshot.running:
            agent.max_steps = max(agent.max_steps, snapshot.max_steps)
        if snapshot.usage:
            agent._run_usage = Usage(**snapshot.usage)
        return snapshot

    def restore_flow(self, flow: Any) -> None:
        """Agents' memories and the plans of a planning flow."""
        for key, agent in flow.agents.items():
            if key in self.agents:
                self.restore_agent(agent, key)
        flow.planning_tool.plans = {pid: dict(plan) for pid, plan in self.plans.items()}
        if self.active_plan_id:
            flow.active_plan_id = self.active_plan_id


def read_session(path: Path, raw: bytes | None = None) -> SessionData:
    """Read ``path`` (or its bytes already read, ``raw``), never through a symlink; raises
    ``SessionError`` only when it is not a session file at all."""
    if raw is None:
        from app.session.files import open_session_dir, read_file

        try:
            with open_session_dir(path.parent, create=False) as dir_fd:
                if dir_fd is None:
                    raise FileNotFoundError(f"no directory {path.parent}")
                raw = read_file(dir_fd, path)
        except OSError as e:
            raise SessionError(f"Cannot read session file {path}: {e}") from e
    lines = raw.decode("utf-8", errors="replace").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    data: SessionData | None = None
    problems: list[str] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            if not isinstance(record, dict):
                raise ValueError("not an object")
        except ValueError:
            if number == len(lines):
                problems.append(
                    f"line {number} was cut off (the process stopped while writing "
                    "it) and was ignored"
                )
            else:
                problems.append(f"line {number} is damaged and was skipped")
            continue
        if data is None:
            if record.get("type") != "session":
                raise SessionError(f"{path} is not a session file (no session header)")
            data = SessionData(id=str(record.get("id") or path.stem), path=path, header=record)
            continue
        _apply(data, record)
        data.records += 1
    if data is None:
        raise SessionError(f"{path} is empty or not a session file")
    data.problems = problems + data.problems
    return data


def _apply(data: SessionData, record: dict[str, Any]) -> None:
    kind = record.get("type")
    if isinstance(record.get("t"), int | float):
        data.updated = max(data.updated, float(record["t"]))
    key = str(record.get("agent") or "")
    if kind == "task":
        data.tasks.append(str(record.get("prompt") or ""))
        data.flow_finished = False
    elif kind == "message" and isinstance(record.get("message"), dict):
        _agent(data, key).messages.append(record["message"])
    elif kind == "memory" and isinstance(record.get("messages"), list):
        _agent(data, key).messages = list(record["messages"])
    elif kind == "run_started":
        snapshot = _agent(data, key)
        snapshot.running = True
        if not record.get("resumed"):
            snapshot.step = 0
            snapshot.usage = None
        snapshot.last_prompt = record.get("prompt") or snapshot.last_prompt
        snapshot.max_steps = int(record.get("max_steps") or snapshot.max_steps)
    elif kind == "checkpoint":
        snapshot = _agent(data, key)
        snapshot.name = str(record.get("name") or snapshot.name)
        snapshot.step = int(record.get("step") or 0)
        snapshot.max_steps = int(record.get("max_steps") or snapshot.max_steps)
        snapshot.state = str(record.get("state") or snapshot.state)
        snapshot.usage = record.get("usage") or snapshot.usage
    elif kind == "run_finished":
        snapshot = _agent(data, key)
        snapshot.running = False
        snapshot.state = str(record.get("state") or snapshot.state)
    elif kind == "plan" and isinstance(record.get("plans"), dict):
        data.plans = record["plans"]
        data.active_plan_id = record.get("active_plan_id")
    elif kind == "flow_finished":
        data.flow_finished = True
    elif kind == "write_failed":
        data.write_failed = str(record.get("error") or "a write failed")
        data.problems.append(f"records were lost: {data.write_failed}")


def _agent(data: SessionData, key: str) -> AgentSnapshot:
    snapshot = data.agents.get(key)
    if snapshot is None:
        snapshot = data.agents[key] = AgentSnapshot(key=key, name=key)
    return snapshot
