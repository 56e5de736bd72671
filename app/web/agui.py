"""The run as an AG-UI event stream (the Agent-User Interaction protocol, docs/web-ui.md).

``POST /api/agui`` takes a ``RunAgentInput``; its thread is a web session. Messages the thread
already holds (matched by id) are skipped: the new user message is the task, new ``tool``
messages answer the front-end tool calls a paused run waits for. The client's ``tools`` are
offered to the model beside ours; ``context`` and ``state`` reach it as a note. The events
(camelCase wire form) are translated from the same event log the page reads, so both agree; a
flow's plan goes as STATE_SNAPSHOT / JSON-Patch STATE_DELTA.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import secrets
import time
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from app.exceptions import SessionBusyError
from app.schema import Message
from app.tool.base import BaseTool, ToolResult
from app.tool.progress import current_tool_call
from app.tool.validation import validator_for
from app.web.session import Mode, WebSession

#: Largest RunAgentInput accepted: clients resend the whole thread every run.
MAX_BODY = 32 << 20
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
#: Longest context-and-state note the model is given (characters).
NOTE_LIMIT = 20_000
#: How long a new run waits for the previous run's stream of the thread to end (a client
#: that aborted and at once runs again: its disconnect may not have reached us yet).
_RELEASE_WAIT = 1.0
#: Log entry kind: a front-end tool call is waiting for the client's result.
WAITING = "client_tool_waiting"


class AguiInputError(ValueError):
    """The posted RunAgentInput cannot be used (the message says why)."""


@dataclass(frozen=True, slots=True)
class ClientTool:
    """A tool of the front end, as ``RunAgentInput.tools`` describes it."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(kw_only=True)
class RunInput:
    """What one RunAgentInput asks for, its known history already set aside."""

    thread_id: str
    run_id: str
    mode: Mode
    prompt: str | None
    tool_results: dict[str, ToolResult]
    tools: list[ClientTool]
    note: str | None
    history: list[tuple[str, str]]  # earlier (role, text) messages the thread does not hold
    message_ids: list[str]


def parse_run_input(body: Any, known: Collection[str] = ()) -> RunInput:
    """The run a RunAgentInput body asks for; messages whose id is in ``known`` are skipped."""
    if not isinstance(body, dict):
        raise AguiInputError("The body must be a RunAgentInput JSON object.")
    thread = body.get("threadId", body.get("thread_id"))
    run = body.get("runId", body.get("run_id"))
    messages = body.get("messages")
    if not isinstance(thread, str) or not thread or not isinstance(run, str) or not run:
        raise AguiInputError("RunAgentInput needs string `threadId` and `runId`.")
    if not isinstance(messages, list):
        raise AguiInputError("RunAgentInput needs `messages` (a list).")
    props = body.get("forwardedProps", body.get("forwarded_props"))
    mode = props.get("mode") if isinstance(props, dict) else None
    if mode not in (None, "agent", "flow"):
        raise AguiInputError("forwardedProps.mode must be 'agent' or 'flow'.")
    fresh = [
        m for m in messages if isinstance(m, dict) and not (m.get("id") and m.get("id") in known)
    ]
    results: dict[str, ToolResult] = {}
    prompt_at = None
    for index, message in enumerate(fresh):
        if message.get("role") == "tool":
            call_id = message.get("toolCallId", message.get("tool_call_id"))
            if not isinstance(call_id, str) or not call_id:
                raise AguiInputError("A `tool` message needs its `toolCallId`.")
            error = message.get("error")  # the client's tool failed: the model is told so
            failed = isinstance(error, str) and bool(error)
            text = _text_of(message.get("content")) or (error if failed else "")
            results[call_id] = ToolResult(output=text, is_error=failed)
        elif message.get("role") == "user":
            prompt_at = index
    prompt = _text_of(fresh[prompt_at].get("content")) if prompt_at is not None else None
    if results and prompt_at is not None and prompt_at > _last_tool(fresh):
        raise AguiInputError(
            "Send the front-end tool results on their own: this run both answers a tool call "
            "and adds a user message after it."
        )
    if results:
        prompt = None
    elif not prompt or not prompt.strip():
        raise AguiInputError(
            "RunAgentInput has no new user message with text to run (nor a tool result for a "
            "waiting front-end tool call); messages the thread already holds are not re-run."
        )
    history = []
    for message in fresh[: prompt_at or 0]:
        text = _text_of(message.get("content"))
        if message.get("role") in ("user", "assistant") and text:
            history.append((str(message["role"]), text))
    ids = [str(m["id"]) for m in messages if isinstance(m, dict) and m.get("id")]
    return RunInput(
        thread_id=thread,
        run_id=run,
        mode="flow" if mode == "flow" else "agent",
        prompt=prompt.strip() if prompt else None,
        tool_results=results,
        tools=_tools_of(body.get("tools")),
        note=context_note(body.get("context"), body.get("state")),
        history=history,
        message_ids=ids,
    )


def _last_tool(messages: list[dict[str, Any]]) -> int:
    return max((i for i, m in enumerate(messages) if m.get("role") == "tool"), default=-1)


def _tools_of(raw: Any) -> list[ClientTool]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise AguiInputError("RunAgentInput `tools` must be a list.")
    tools: dict[str, ClientTool] = {}
    for item in raw:
        name = item.get("name") if isinstance(item, dict) else None
        if not isinstance(name, str) or not _TOOL_NAME.match(name):
            raise AguiInputError(
                f"Each tool needs a `name` of 1-64 letters, digits, '_' or '-' (got {name!r})."
            )
        assert isinstance(item, dict)
        parameters = item.get("parameters") or {"type": "object", "properties": {}}
        if not _object_schema(parameters):
            raise AguiInputError(
                f"Tool {name!r}: `parameters` must be a JSON Schema of type object (`properties` "
                "an object of schemas, `required` a list of names)."
            )
        try:
            validator_for(parameters)
        except Exception as e:  # a schema the validator cannot compile: the client's mistake
            raise AguiInputError(f"Tool {name!r}: unusable `parameters` schema: {e}") from None
        tools[name] = ClientTool(name, str(item.get("description") or ""), parameters)
    return list(tools.values())


def _object_schema(schema: Any) -> bool:
    """Whether ``schema`` is an object schema a model API accepts as a tool's parameters."""
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        return False
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    return (
        isinstance(properties, dict)
        and all(isinstance(v, dict) for v in properties.values())
        and isinstance(required, list)
        and all(isinstance(r, str) for r in required)
    )


def context_note(context: Any, state: Any) -> str | None:
    """What the model is told of the front end's ``context`` and ``state`` (None: nothing)."""
    lines = []
    if isinstance(context, list):
        for item in context:
            if isinstance(item, dict) and (item.get("value") or item.get("description")):
                lines.append(f"- {item.get('description') or 'context'}: {item.get('value', '')}")
    elif context is not None:
        raise AguiInputError("RunAgentInput `context` must be a list of {description, value}.")
    parts = []
    if lines:
        parts.append("Context from the application the user is working in:\n" + "\n".join(lines))
    if state not in (None, {}, []):
        shown = json.dumps(state, ensure_ascii=False, sort_keys=True)
        parts.append(f"The application's current state (JSON): {shown}")
    note = "\n\n".join(parts)
    if len(note) > NOTE_LIMIT:  # a huge state must not crowd the task out of the context
        note = note[:NOTE_LIMIT] + "\n...(cut: the context and state are longer than this)"
    return note or None


def _text_of(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"
        ]
        return "\n".join(parts) if parts else None
    return None


class FrontendTool(BaseTool):
    """A tool the AG-UI client runs: a call waits (the run pauses) until the client posts
    the result in its next run."""

    waiter: Callable[[str], Awaitable[ToolResult]]

    async def execute(self, **kwargs: Any) -> ToolResult:
        call = current_tool_call()
        return await self.waiter(call.call_id if call is not None else "")


class AguiThread:
    """One AG-UI thread: its web session, the message ids it holds, the front-end calls
    waiting for results, and whether a stream of it is open."""

    def __init__(self, thread_id: str, session: WebSession) -> None:
        self.thread_id = thread_id
        self.session = session
        self.seen: set[str] = set()
        self.waiting: dict[str, asyncio.Future[ToolResult]] = {}
        self.results: dict[str, ToolResult] = {}  # results that came before their call waited
        self.answered: set[str] = set()  # calls the client posted results for
        self.tool_names: set[str] = set()
        self.note: str | None = None
        self.stopping: asyncio.Task[bool] | None = None
        self.released = asyncio.Event()
        self.released.set()

    async def wait_for_result(self, call_id: str) -> ToolResult:
        if call_id in self.results:
            return self.results.pop(call_id)
        future: asyncio.Future[ToolResult] = asyncio.get_running_loop().create_future()
        self.waiting[call_id] = future
        self.session.note(WAITING, call_id=call_id)
        try:
            return await future
        finally:
            self.waiting.pop(call_id, None)

    async def begin(self, run: RunInput, *, new: bool) -> int:
        """Start the run, or continue the paused one with the client's tool results; returns
        the log position its stream starts after. SessionBusyError when a run is active."""
        session = self.session
        if self.stopping is not None:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await self.stopping
        if session.running and not self.waiting and not self.released.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.released.wait(), _RELEASE_WAIT)
            if self.stopping is not None:
                with contextlib.suppress(Exception, asyncio.CancelledError):
                    await self.stopping
        if run.tool_results:
            return self._answer(run)
        if session.running:
            if not self.waiting:
                raise SessionBusyError(
                    f"Thread {self.thread_id!r} already has a run in progress; wait for its "
                    "RUN_FINISHED, or abort it (close the request) and run again."
                )
            await session.stop()  # the client left its tool calls unanswered: a new task
        self.waiting.clear()
        self.results.clear()
        self._install(run.tools)
        prompt = run.prompt or ""
        if new:
            earlier = [
                Message.user_message(text) if role == "user" else Message.assistant_message(text)
                for role, text in run.history
            ]
            for agent in session.agents.values():
                agent.memory.add_messages(earlier)
        if run.note and run.note != self.note:
            if session.agent is not None:
                session.agent.update_memory("user", run.note)
            else:  # a flow plans from the request: the note goes with it
                prompt = f"{run.note}\n\n{prompt}"
        self.note = run.note
        start = session.log.last_id
        session.start(prompt)
        return start

    def _answer(self, run: RunInput) -> int:
        if not self.waiting:
            if self.session.running:
                raise SessionBusyError(
                    f"Thread {self.thread_id!r} already has a run in progress; its front-end "
                    "tool calls are not waiting yet."
                )
            raise AguiInputError(
                "No front-end tool call of this thread is waiting for a result (the run that "
                "made it ended, or the server restarted): send a user message instead."
            )
        if not set(run.tool_results) & set(self.waiting):
            raise AguiInputError(
                f"The tool results answer no waiting call: the run waits for "
                f"{', '.join(sorted(self.waiting))}."
            )
        start = self.session.log.last_id
        self._install(run.tools)
        if run.note and run.note != self.note:
            for agent in self.session.agents.values():
                add_note = getattr(agent, "add_note", None)
                if add_note is not None:
                    add_note(run.note)
        self.note = run.note or self.note
        self.answered.update(run.tool_results)
        for call_id, result in run.tool_results.items():
            future = self.waiting.get(call_id)
            if future is not None and not future.done():
                future.set_result(result)
            else:
                self.results[call_id] = result
        return start

    def _install(self, tools: list[ClientTool]) -> None:
        """Offer ``tools`` to the session's agents (replacing the last run's front-end tools)."""
        found = (getattr(a, "available_tools", None) for a in self.session.agents.values())
        collections = [c for c in found if c is not None]
        for collection in collections:
            for name in self.tool_names:
                collection.remove_tool(name)
        self.tool_names = set()
        clash = sorted({t.name for c in collections for t in tools if t.name in c.tool_map})
        if clash:
            raise AguiInputError(
                f"Front-end tool name(s) {', '.join(clash)} clash with the agent's own tools; "
                "rename them."
            )
        for collection in collections:
            collection.add_tools(
                *(
                    FrontendTool(
                        name=t.name,
                        description=t.description,
                        parameters=t.parameters,
                        waiter=self.wait_for_result,
                    )
                    for t in tools
                )
            )
        self.tool_names = {t.name for t in tools}

    def abort(self) -> None:
        """The client closed the stream of a run still going: stop the task (Ctrl-C)."""
        if self.session.running and self.stopping is None:
            self.stopping = asyncio.create_task(self.session.stop())
            self.stopping.add_done_callback(self._stopped)

    def _stopped(self, task: asyncio.Task[bool]) -> None:
        if self.stopping is task:
            self.stopping = None


def _ms() -> int:
    return int(time.time() * 1000)


def _new_id(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(6)}"


@dataclass
class AguiTranslator:
    """Turns web log entries of one run into AG-UI events (dicts in wire form)."""

    thread_id: str
    run_id: str
    client_tools: Collection[str] = ()
    answered: Collection[str] = ()  # front-end calls whose result the client posted
    message_id: str | None = None  # the assistant text message being streamed
    turn_id: str | None = None  # the assistant message of this model turn (text + calls)
    streamed: bool = False
    plan: dict[str, Any] | None = None
    open_steps: list[str] = field(default_factory=list)
    client_calls: list[str] = field(default_factory=list)
    done_calls: set[str] = field(default_factory=set)
    finished: bool = False
    #: Message ids the client now holds (the thread's ``seen``: not re-read next run).
    emitted_ids: set[str] = field(default_factory=set)

    def _event(self, kind: str, **fields: Any) -> dict[str, Any]:
        return {"type": kind, "timestamp": _ms(), **fields}

    def start(self) -> list[dict[str, Any]]:
        return [self._event("RUN_STARTED", threadId=self.thread_id, runId=self.run_id)]

    def _close_message(self) -> list[dict[str, Any]]:
        if self.message_id is None:
            return []
        message_id, self.message_id = self.message_id, None
        return [self._event("TEXT_MESSAGE_END", messageId=message_id)]

    def _turn(self) -> str:
        if self.turn_id is None:
            self.turn_id = _new_id("msg")
            self.emitted_ids.add(self.turn_id)
        return self.turn_id

    def _text(self, text: str) -> list[dict[str, Any]]:
        out = []
        if self.message_id is None:
            # The text opens the turn's assistant message; its calls name it as their parent.
            self.message_id = self.turn_id = _new_id("msg")
            self.emitted_ids.add(self.message_id)
            start = {"messageId": self.message_id, "role": "assistant"}
            out.append(self._event("TEXT_MESSAGE_START", **start))
        out.append(self._event("TEXT_MESSAGE_CONTENT", messageId=self.message_id, delta=text))
        return out

    def _start_step(self, name: str) -> list[dict[str, Any]]:
        self.open_steps.append(name)
        return [self._event("STEP_STARTED", stepName=name)]

    def _finish_step(self, name: str) -> list[dict[str, Any]]:
        if name not in self.open_steps:
            return []
        self.open_steps.remove(name)
        return [self._event("STEP_FINISHED", stepName=name)]

    def _wind_down(self) -> list[dict[str, Any]]:
        out = self._close_message()
        out += [self._event("STEP_FINISHED", stepName=n) for n in reversed(self.open_steps)]
        self.open_steps.clear()
        self.finished = True
        return out

    def _call(self, call_id: str, name: str, arguments: str) -> list[dict[str, Any]]:
        parent = self._turn()
        out = self._close_message()
        return [
            *out,
            self._event(
                "TOOL_CALL_START", toolCallId=call_id, toolCallName=name, parentMessageId=parent
            ),
            self._event("TOOL_CALL_ARGS", toolCallId=call_id, delta=arguments),
            self._event("TOOL_CALL_END", toolCallId=call_id),
        ]

    def _result(self, call_id: str, content: str) -> list[dict[str, Any]]:
        message_id = _new_id("res")
        self.emitted_ids.add(message_id)
        return [
            self._event(
                "TOOL_CALL_RESULT",
                messageId=message_id,
                toolCallId=call_id,
                content=content,
                role="tool",
            )
        ]

    def translate(self, entry: dict[str, Any]) -> list[dict[str, Any]]:
        """The AG-UI events for one log entry (often none)."""
        kind = entry.get("kind")
        step = f"{entry.get('source', 'agent')} step {entry.get('step', 0)}"
        out: list[dict[str, Any]] = []
        if kind == "step_started":
            self.streamed = False
            self.turn_id = None
            out += self._start_step(step)
        elif kind == "step_finished":
            out += self._close_message()
            self.turn_id = None
            out += self._finish_step(step)
        elif kind == "text_delta" and entry.get("text"):
            out += self._text(entry["text"])
            self.streamed = True
        elif kind == "thought":
            if not self.streamed and entry.get("text"):
                out += self._text(entry["text"])
            out += self._close_message()
            self.streamed = False
        elif kind == "tool_call":
            call_id = str(entry.get("call_id") or _new_id("call"))
            name = str(entry.get("name", ""))
            if name in self.client_tools:
                self.client_calls.append(call_id)
            out += self._call(call_id, name, str(entry.get("arguments", "")))
        elif kind == "tool_result":
            call_id = str(entry.get("call_id", ""))
            self.done_calls.add(call_id)
            if call_id not in self.answered:  # the client holds the results it posted
                out += self._result(call_id, str(entry.get("output", "")))
        elif kind == WAITING:
            out += self._wind_down()
            pending = [c for c in self.client_calls if c not in self.done_calls]
            pending = pending or [str(entry.get("call_id", ""))]
            ids = {"threadId": self.thread_id, "runId": self.run_id}
            outcome = {"type": "success", "pendingToolCallIds": pending}
            out.append(self._event("RUN_FINISHED", **ids, outcome=outcome))
        elif kind == "plan" and isinstance(entry.get("plan"), dict):
            out += self._plan(entry)
        elif kind == "task_finished":
            answer = entry.get("final_answer")
            out += self._wind_down()
            if entry.get("ok"):
                ids = {"threadId": self.thread_id, "runId": self.run_id}
                out.append(self._event("RUN_FINISHED", **ids, result=answer))
            else:
                code = entry.get("stop_reason") or ("stopped" if entry.get("stopped") else "failed")
                failure = str(entry.get("failure") or "the run failed")
                out.append(self._event("RUN_ERROR", message=failure, code=str(code)))
        return out

    def _plan(self, entry: dict[str, Any]) -> list[dict[str, Any]]:
        plan = entry["plan"]
        out: list[dict[str, Any]] = []
        change = entry.get("change")
        index = entry.get("step_index")
        if change == "step_started" and isinstance(index, int):
            out += self._start_step(f"plan step {index}")
        elif change == "step_finished" and isinstance(index, int):
            out += self._finish_step(f"plan step {index}")
        elif change in ("plan_created", "plan_updated"):
            # The planner's call, as the client would see any tool call (it is ours, not the
            # model's raw one: the plan it made, as applied).
            self.turn_id = None
            command = "create" if change == "plan_created" else "update"
            args = {"command": command, "plan_id": entry.get("plan_id", ""), **plan}
            call_id = _new_id("plan")
            out += self._call(call_id, "planning", json.dumps(args, ensure_ascii=False))
            out += self._result(call_id, str(entry.get("plan_text", "")))
            self.turn_id = None
        elif change == "summary" and entry.get("note"):
            self.turn_id = None
            out += self._text(str(entry["note"]))
            out += self._close_message()
        old = self.plan
        self.plan = plan
        if old is None or old.get("steps") != plan.get("steps"):
            out.append(self._event("STATE_SNAPSHOT", snapshot={"plan": plan}))
            return out
        ops = []
        for key in ("step_statuses", "step_notes", "title"):
            new_value, old_value = plan.get(key), old.get(key)
            if new_value == old_value:
                continue
            if (
                isinstance(new_value, list)
                and isinstance(old_value, list)
                and len(new_value) == len(old_value)
            ):
                ops += [
                    {"op": "replace", "path": f"/plan/{key}/{i}", "value": v}
                    for i, (v, w) in enumerate(zip(new_value, old_value, strict=True))
                    if v != w
                ]
            else:
                ops.append({"op": "replace", "path": f"/plan/{key}", "value": new_value})
        if ops:
            out.append(self._event("STATE_DELTA", delta=ops))
        return out
