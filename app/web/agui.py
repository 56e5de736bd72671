"""The run as an AG-UI event stream (the Agent-User Interaction protocol, docs/web-ui.md).

``POST /api/agui`` takes a ``RunAgentInput``: its last user message is the task, its thread a
web session. The events (camelCase wire form) are translated from the same event log the page
reads, so both always agree; a flow's plan goes as STATE_SNAPSHOT / JSON-Patch STATE_DELTA.
"""

from __future__ import annotations

import secrets
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.web.session import Mode


class AguiInputError(ValueError):
    """The posted RunAgentInput cannot be used (the message says why)."""


def parse_run_input(body: Any) -> tuple[str, str, str, Mode]:
    """(thread id, run id, prompt, mode) from a RunAgentInput body."""
    if not isinstance(body, dict):
        raise AguiInputError("The body must be a RunAgentInput JSON object.")
    thread = body.get("threadId", body.get("thread_id"))
    run = body.get("runId", body.get("run_id"))
    messages = body.get("messages")
    if not isinstance(thread, str) or not thread or not isinstance(run, str) or not run:
        raise AguiInputError("RunAgentInput needs string `threadId` and `runId`.")
    if not isinstance(messages, list):
        raise AguiInputError("RunAgentInput needs `messages` (a list).")
    prompt = None
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            prompt = _text_of(message.get("content"))
            break
    if not prompt or not prompt.strip():
        raise AguiInputError("RunAgentInput has no user message with text to run.")
    props = body.get("forwardedProps", body.get("forwarded_props"))
    mode = props.get("mode") if isinstance(props, dict) else None
    if mode not in (None, "agent", "flow"):
        raise AguiInputError("forwardedProps.mode must be 'agent' or 'flow'.")
    return thread, run, prompt, "flow" if mode == "flow" else "agent"


def _text_of(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"
        ]
        return "\n".join(parts) if parts else None
    return None


def _ms() -> int:
    return int(time.time() * 1000)


class AguiTranslator:
    """Turns web log entries of one task into AG-UI events (dicts in wire form)."""

    def __init__(self, thread_id: str, run_id: str) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self.message_id: str | None = None  # the assistant message being streamed
        self.streamed = False
        self.plan: dict[str, Any] | None = None
        self.open_steps: list[str] = []
        self.finished = False

    def _event(self, kind: str, **fields: Any) -> dict[str, Any]:
        return {"type": kind, "timestamp": _ms(), **fields}

    def _close_message(self) -> list[dict[str, Any]]:
        if self.message_id is None:
            return []
        message_id, self.message_id = self.message_id, None
        return [self._event("TEXT_MESSAGE_END", messageId=message_id)]

    def _open_message(self) -> list[dict[str, Any]]:
        if self.message_id is not None:
            return []
        self.message_id = "msg-" + secrets.token_hex(6)
        return [self._event("TEXT_MESSAGE_START", messageId=self.message_id, role="assistant")]

    def _text(self, text: str) -> list[dict[str, Any]]:
        opened = self._open_message()
        return [*opened, self._event("TEXT_MESSAGE_CONTENT", messageId=self.message_id, delta=text)]

    def _start_step(self, name: str) -> list[dict[str, Any]]:
        self.open_steps.append(name)
        return [self._event("STEP_STARTED", stepName=name)]

    def _finish_step(self, name: str) -> list[dict[str, Any]]:
        if name not in self.open_steps:
            return []
        self.open_steps.remove(name)
        return [self._event("STEP_FINISHED", stepName=name)]

    def translate(self, entry: dict[str, Any]) -> list[dict[str, Any]]:
        """The AG-UI events for one log entry (often none)."""
        kind = entry.get("kind")
        step = f"{entry.get('source', 'agent')} step {entry.get('step', 0)}"
        out: list[dict[str, Any]] = []
        if kind == "task_started":
            out.append(self._event("RUN_STARTED", threadId=self.thread_id, runId=self.run_id))
        elif kind == "step_started":
            self.streamed = False
            out += self._start_step(step)
        elif kind == "step_finished":
            out += self._close_message()
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
            out += self._close_message()
            call_id = str(entry.get("call_id") or "call-" + secrets.token_hex(4))
            name, arguments = str(entry.get("name", "")), str(entry.get("arguments", ""))
            out += [
                self._event("TOOL_CALL_START", toolCallId=call_id, toolCallName=name),
                self._event("TOOL_CALL_ARGS", toolCallId=call_id, delta=arguments),
                self._event("TOOL_CALL_END", toolCallId=call_id),
            ]
        elif kind == "tool_result":
            out.append(
                self._event(
                    "TOOL_CALL_RESULT",
                    messageId="res-" + secrets.token_hex(6),
                    toolCallId=str(entry.get("call_id", "")),
                    content=str(entry.get("output", "")),
                    role="tool",
                )
            )
        elif kind == "plan" and isinstance(entry.get("plan"), dict):
            out += self._plan(entry)
        elif kind == "task_finished":
            out += self._close_message()
            out += [self._event("STEP_FINISHED", stepName=n) for n in reversed(self.open_steps)]
            self.open_steps.clear()
            self.finished = True
            if entry.get("ok"):
                answer = entry.get("final_answer")
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
