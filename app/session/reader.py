"""Reading a session file back: a cut-off or damaged line is skipped and reported, never the
whole session. Fields are checked here, so restoring cannot fail later.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.exceptions import SessionError
from app.llm.usage import Usage
from app.schema import AgentState, Message
from app.session.files import open_session_dir, read_file
from app.text import clean_tree

if TYPE_CHECKING:
    from app.agent.base import BaseAgent

_MESSAGE_FIELDS = (
    "role",
    "content",
    "tool_calls",
    "name",
    "tool_call_id",
    "is_error",
    "thinking_blocks",
)


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
    running: bool = False  # a run started and never finished (Ctrl-C, kill, crash)
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
    updated: float = 0.0
    #: Why records were lost when a write failed (disk full...), else None.
    write_failed: str | None = None
    #: The file's bytes as read (the web UI shows the history from them).
    raw: bytes = field(default=b"", repr=False)

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
    def failed(self) -> bool:
        """Whether the last task ended in failure (an endpoint outage...): ``--resume``
        without a prompt carries it on."""
        return self.state == "failed"

    @property
    def state(self) -> str:
        """``interrupted`` (a task was cut short: Ctrl-C, a kill or a crash; ``--resume``
        carries it on), ``finished``, ``failed``, ``stopped`` (max steps) or ``empty``; a
        session whose writing failed is ``incomplete`` whatever its records say."""
        if self.write_failed is not None:
            return "incomplete"
        if self.incomplete:
            return "interrupted"
        if self.kind == "flow":
            plan = self.plans.get(self.active_plan_id or "")
            if plan is None:  # a task whose planning failed, or none yet
                return "failed" if self.tasks else "empty"
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
        """Put ``agent`` back as it was at the last checkpoint: memory, step count and budget
        (of a run cut off or failed, to be carried on) and usage. Returns the snapshot used
        (None when the session has none)."""

        snapshot = self.snapshot(key)
        if snapshot is None:
            return None
        agent.memory.messages = [
            Message(**{k: v for k, v in data.items() if k in _MESSAGE_FIELDS})
            for data in snapshot.messages
        ]
        agent.state = AgentState.IDLE
        agent.current_step = 0
        if snapshot.running or snapshot.state == "ERROR":
            # The run goes on within its own budget: a failed step is asked again.
            failed = not snapshot.running and snapshot.step > 0
            agent.current_step = snapshot.step - 1 if failed else snapshot.step
            if snapshot.max_steps:
                agent.max_steps = snapshot.max_steps
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
    """Read ``path`` (or its bytes, ``raw``), never through a symlink. ``SessionError`` only
    when it is no session file; a bad line (not JSON, too deep, wrong types, NaN, not UTF-8)
    is skipped and reported in ``problems``."""
    if raw is None:
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
            record = _decode(line)
        except Exception as e:  # whatever is wrong with one line skips only that line
            if number == len(lines):
                problems.append(
                    f"line {number} was cut off (the process stopped while writing "
                    "it) and was ignored"
                )
            else:
                problems.append(f"line {number} is damaged ({_why(e)}) and was skipped")
            continue
        if data is None:
            if record.get("type") != "session":
                raise SessionError(f"{path} is not a session file (no session header)")
            data = _header(path, record, problems)
            continue
        try:
            _apply(data, record)
        except Exception as e:  # the record is unusable, the session is not
            problems.append(f"line {number} is damaged ({_why(e)}) and was skipped")
    if data is None:
        raise SessionError(f"{path} is empty or not a session file")
    data.problems = problems + data.problems
    data.raw = raw
    return data


class _Damaged(ValueError):
    """A record whose fields do not have the types the writer gives them."""


def _decode(line: str) -> dict[str, Any]:
    """One line as a record: a JSON object, its text valid UTF-8 (a lone surrogate escape
    becomes U+FFFD). Raises on anything else, nesting too deep included (RecursionError)."""
    record = json.loads(line)
    if not isinstance(record, dict):
        raise _Damaged("not a JSON object")
    return clean_tree(record)


def _why(error: BaseException) -> str:
    if isinstance(error, RecursionError):
        return "nested too deeply"
    if isinstance(error, _Damaged):
        return str(error)
    if isinstance(error, json.JSONDecodeError):
        return f"not JSON: {error.msg}"
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text[:120]}"


def _header(path: Path, record: dict[str, Any], problems: list[str]) -> SessionData:
    """The session from its header line; fields of the wrong type are dropped (and reported)
    so that listing the session never fails on them."""
    header = dict(record)
    for name in ("id", "kind", "program"):
        if name in header and not isinstance(header[name], str):
            problems.append(f"the header's {name!r} is not text and was ignored")
            del header[name]
    created = header.get("created")
    if created is not None and _number(created) is None:
        problems.append("the header's 'created' time is not a number and was ignored")
        del header["created"]
    return SessionData(id=str(header.get("id") or path.stem), path=path, header=header)


def _apply(data: SessionData, record: dict[str, Any]) -> None:
    """Apply one record. Every field is checked before anything changes, so a damaged record
    (which raises) leaves the session as it was."""
    kind = record.get("type")
    when = _number(record.get("t"))
    key = _text(record, "agent") or ""
    if kind == "task":
        data.tasks.append(_text(record, "prompt") or "")
        data.flow_finished = False
    elif kind == "message" and "message" in record:
        message = _message(record["message"])
        _agent(data, key).messages.append(message)
    elif kind == "memory" and "messages" in record:
        if not isinstance(record["messages"], list):
            raise _Damaged("'messages' is not a list")
        messages = [_message(m) for m in record["messages"]]
        _agent(data, key).messages = messages
    elif kind == "run_started":
        prompt = _text(record, "prompt")
        max_steps = _count(record, "max_steps")
        snapshot = _agent(data, key)
        snapshot.running = True
        if not record.get("resumed"):
            snapshot.step = 0
            snapshot.usage = None
        snapshot.last_prompt = prompt or snapshot.last_prompt
        snapshot.max_steps = max_steps or snapshot.max_steps
    elif kind == "checkpoint":
        name = _text(record, "name")
        step = _count(record, "step")
        max_steps = _count(record, "max_steps")
        state = _text(record, "state")
        usage = _usage(record.get("usage"))
        snapshot = _agent(data, key)
        snapshot.name = name or snapshot.name
        snapshot.step = step or 0
        snapshot.max_steps = max_steps or snapshot.max_steps
        snapshot.state = state or snapshot.state
        snapshot.usage = usage or snapshot.usage
    elif kind == "run_finished":
        state = _text(record, "state")
        snapshot = _agent(data, key)
        # A run cut short by Ctrl-C says so: it stays to be carried on, as after a kill.
        snapshot.running = record.get("interrupted") is True
        snapshot.state = state or snapshot.state
    elif kind == "plan" and "plans" in record:
        plans = _plans(record["plans"])
        active = record.get("active_plan_id")
        if active is not None and not isinstance(active, str):
            raise _Damaged("'active_plan_id' is not text")
        data.plans = plans
        data.active_plan_id = active
    elif kind == "flow_finished":
        data.flow_finished = True
    elif kind == "write_failed":
        data.write_failed = str(record.get("error") or "a write failed")
        data.problems.append(f"records were lost: {data.write_failed}")
    if when is not None:
        data.updated = max(data.updated, when)


def _number(value: Any) -> float | None:
    """A finite number as a float; None for anything else (NaN, infinities, out of range)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _text(record: dict[str, Any], name: str) -> str | None:
    value = record.get(name)
    if value is not None and not isinstance(value, str):
        raise _Damaged(f"{name!r} is not text")
    return value


def _count(record: dict[str, Any], name: str) -> int | None:
    """A whole number of steps (None when absent); a writer only ever writes small ints."""
    value = record.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_COUNT:
        raise _Damaged(f"{name!r} is not a step count")
    return value


_MAX_COUNT = 10**9
_ROLES = ("system", "user", "assistant", "tool")  # app.schema.ROLE_VALUES (pydantic not loaded)
_USAGE_COUNTS = ("prompt_tokens", "completion_tokens", "total_tokens", "cached_tokens", "requests")


def _message(value: Any) -> dict[str, Any]:
    """A stored message with the types ``app.schema.Message`` accepts, else ``_Damaged``
    (checked here, so that restoring it later cannot fail)."""
    if not isinstance(value, dict):
        raise _Damaged("a message is not an object")
    if value.get("role") not in _ROLES:
        raise _Damaged("a message's role is not one of " + ", ".join(_ROLES))
    for name in ("content", "name", "tool_call_id"):
        if not isinstance(value.get(name), str | None):
            raise _Damaged(f"a message's {name!r} is not text")
    if not isinstance(value.get("is_error", False), bool):
        raise _Damaged("a message's 'is_error' is not true or false")
    calls = value.get("tool_calls")
    if calls is not None:
        if not isinstance(calls, list):
            raise _Damaged("a message's 'tool_calls' is not a list")
        for call in calls:
            function = call.get("function") if isinstance(call, dict) else None
            if (
                not isinstance(function, dict)
                or not isinstance(call.get("id"), str)
                or not isinstance(call.get("type", ""), str)
                or not isinstance(function.get("name"), str)
                or not isinstance(function.get("arguments", ""), str)
            ):
                raise _Damaged("a message's tool call is malformed")
    return value


def _usage(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _Damaged("'usage' is not an object")
    for name in _USAGE_COUNTS:
        count = value.get(name, 0)
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise _Damaged(f"usage {name!r} is not a token count")
    if not isinstance(value.get("estimated", False), bool):
        raise _Damaged("usage 'estimated' is not true or false")
    cost = value.get("cost")
    if cost is not None and _number(cost) is None:
        raise _Damaged("usage 'cost' is not a number")
    return value


def _plans(value: Any) -> dict[str, dict[str, Any]]:
    """A flow's plans with the shape the planning tool keeps them in."""
    if not isinstance(value, dict):
        raise _Damaged("'plans' is not an object")
    for plan in value.values():
        if not isinstance(plan, dict):
            raise _Damaged("a plan is not an object")
        if not isinstance(plan.get("title"), str):
            raise _Damaged("a plan's title is not text")
        columns: list[list[Any]] = [
            column
            for column in (plan.get(name) for name in ("steps", "step_statuses", "step_notes"))
            if isinstance(column, list) and all(isinstance(item, str) for item in column)
        ]
        if len(columns) != 3:
            raise _Damaged("a plan's steps, statuses or notes are not lists of text")
        if len({len(column) for column in columns}) != 1:
            raise _Damaged("a plan's steps, statuses and notes differ in number")
    return value


def _agent(data: SessionData, key: str) -> AgentSnapshot:
    snapshot = data.agents.get(key)
    if snapshot is None:
        snapshot = data.agents[key] = AgentSnapshot(key=key, name=key)
    return snapshot
