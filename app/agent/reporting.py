"""How a ``ToolCallAgent``'s step is shown: typed events for whoever listens (the terminal
view, the web UI, sessions, traces), log lines when nobody does. Nothing here changes the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any, Protocol

from app.events import (
    EventBus,
    Reasoning,
    TextDelta,
    Thought,
    ToolCallEvent,
    ToolProgress,
    ToolResultEvent,
)
from app.logger import log_enabled, logger, redact_registered
from app.schema import ToolCall
from app.tool.progress import ProgressReporter

_LOG_PREVIEW = 300


class Shown(Protocol):
    """What the reporter reads of its agent (its name and step change while it lives)."""

    name: str
    current_step: int


class StepReporter:
    """Events and log lines of one agent's steps: the model's reasoning, text and tool calls,
    each call's progress and result."""

    __slots__ = ("agent", "bus")

    def __init__(self, agent: Shown, bus: EventBus) -> None:
        self.agent = agent
        self.bus = bus

    def delta_sink(self) -> Any:
        """A callback streaming the model's text as ``TextDelta`` events, when watched."""
        bus = self.bus
        if not bus.watched:
            return None
        name, step = self.agent.name, self.agent.current_step

        async def on_delta(text: str) -> None:
            await bus.emit(TextDelta(name, step=step, text=text))

        return on_delta

    async def reasoning(self, text: str | None) -> None:
        """The model's reasoning: shown as thinking, never the answer."""
        reasoning = (text or "").strip()
        if not reasoning:
            return
        agent, bus = self.agent, self.bus
        if bus.active:
            await bus.emit(Reasoning(agent.name, step=agent.current_step, text=reasoning))
        if not bus.watched and log_enabled("INFO"):
            logger.info(f"💭 {agent.name} is thinking: {preview(reasoning)}")

    def log_reply(self, content: str, calls: list[ToolCall]) -> None:
        """The reply in the log (listeners show it themselves: the log stays quiet)."""
        if self.bus.watched or not log_enabled("INFO"):
            return
        name = self.agent.name
        if content:
            logger.info(f"✨ {name}'s thoughts: {content}")
        if calls:
            logger.info(
                f"🛠️ {name} selected {len(calls)} tool(s): "
                + ", ".join(call.function.name for call in calls)
            )
            for call in calls:
                function = call.function
                logger.info(f"🔧 {function.name} arguments: {preview(function.arguments)}")

    async def reply(self, content: str, calls: list[ToolCall]) -> None:
        """The reply's text and tool calls as events (after they are in memory)."""
        bus = self.bus
        if not bus.active:
            return
        agent = self.agent
        step = agent.current_step
        if content:
            await bus.emit(Thought(agent.name, step=step, text=content))
        for call in calls:
            function = call.function
            await bus.emit(
                ToolCallEvent(
                    agent.name,
                    step=step,
                    call_id=call.id,
                    name=function.name,
                    arguments=function.arguments,
                )
            )

    def progress(self, call: ToolCall) -> ProgressReporter:
        """Where the progress of ``call`` goes: ``ToolProgress`` events."""
        agent, bus = self.agent, self.bus
        name, step = call.function.name, agent.current_step

        async def report(progress: float, total: float | None, message: str | None) -> None:
            if bus.active:
                await bus.emit(
                    ToolProgress(
                        agent.name,
                        step=step,
                        call_id=call.id,
                        name=name,
                        progress=progress,
                        total=total,
                        message=redact_registered(message) if message else message,
                    )
                )

        return report

    async def result(
        self,
        call: ToolCall,
        text: str,
        *,
        failed: bool,
        image: str | None = None,
        seconds: float | None = None,
        log: bool = True,
    ) -> None:
        """A call's result, as stored in memory; a nameless call is not shown."""
        name = call.function.name if call.function else ""
        if not name.strip():
            return
        bus = self.bus
        if log and not bus.watched and log_enabled("INFO"):
            logger.info(f"🎯 Tool '{name}' completed: {preview(text)}")
        if bus.active:
            agent = self.agent
            await bus.emit(
                ToolResultEvent(
                    agent.name,
                    step=agent.current_step,
                    call_id=call.id,
                    name=name,
                    output=text,
                    error=failed,
                    duration=seconds,
                    image=image,
                )
            )

    async def cancelled(self, call: ToolCall, partial: str) -> None:
        """A call cut short (Stop, Ctrl-C) still tells the listeners it ended, with what it
        printed until then (shielded: the cancelled task may not await anything else)."""
        name = call.function.name
        bus = self.bus
        if not bus.active or not name.strip():
            return
        agent = self.agent
        event = ToolResultEvent(
            agent.name,
            step=agent.current_step,
            call_id=call.id,
            name=name,
            output=redact_registered(partial),
            error=True,
            cancelled=True,
        )
        with contextlib.suppress(BaseException):
            await asyncio.shield(bus.emit(event))


def preview(value: Any) -> str:
    """``value`` on one line, cut for the log."""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    text = text.replace("\n", " ")
    return text if len(text) <= _LOG_PREVIEW else text[:_LOG_PREVIEW] + "…"
