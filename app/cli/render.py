"""The terminal view of a run, drawn on stderr from its events (the same ones a library
receives), redacted as every outward channel is (:mod:`app.redaction`); answers go to stdout,
printed by the programs themselves.
"""

from __future__ import annotations

import json
import sys
from typing import IO, Any

from app.events import (
    Compacted,
    Event,
    PlanChanged,
    Reasoning,
    StepStarted,
    TextDelta,
    Thought,
    ToolCallEvent,
    ToolProgress,
    ToolResultEvent,
    UsageReport,
)
from app.redaction import EventRedactor

_PREVIEW = 300


class EventRenderer:
    """A listener that writes events as lines; streamed text is written as it arrives."""

    def __init__(
        self, stream: IO[str] | None = None, *, show_source: bool = False, show_usage: bool = False
    ) -> None:
        self._stream = stream
        self.show_source = show_source
        self.show_usage = show_usage
        self._open_line: tuple[str, int] | None = None  # (source, step) of streamed text
        self._streamed: set[tuple[str, int]] = set()
        self._redact = EventRedactor(TextDelta)

    @property
    def stream(self) -> IO[str]:
        return self._stream or sys.stderr

    def __call__(self, event: Event) -> None:
        for shown in self._redact(event):
            self._show(shown)

    def _show(self, event: Event) -> None:
        if isinstance(event, TextDelta):
            self._delta(event)
            return
        self._end_line()
        line = self._line(event)
        if line is not None:
            self.stream.write(line + "\n")
            self.stream.flush()

    def _who(self, event: Event) -> str:
        return f"[{event.source}] " if self.show_source else ""

    def _delta(self, event: TextDelta) -> None:
        key = (event.source, event.step)
        if self._open_line != key:
            self._end_line()
            self.stream.write(f"{self._who(event)}✨ {event.source}: ")
            self._open_line = key
            self._streamed.add(key)
        self.stream.write(event.text)
        self.stream.flush()

    def _end_line(self) -> None:
        if self._open_line is not None:
            self.stream.write("\n")
            self.stream.flush()
            self._open_line = None

    def _line(self, event: Event) -> str | None:
        who = self._who(event)
        if isinstance(event, StepStarted):
            self._streamed = {k for k in self._streamed if k[0] != event.source}
            return f"{who}Executing step {event.step}/{event.max_steps}"
        if isinstance(event, Thought):
            if (event.source, event.step) in self._streamed:
                return None  # already shown as it streamed
            return f"{who}✨ {event.source}'s thoughts: {event.text}"
        if isinstance(event, Reasoning):
            return f"{who}💭 {event.source} is thinking: {_preview(event.text)}"
        if isinstance(event, ToolCallEvent):
            return f"{who}🔧 {event.name} {_preview(event.arguments)}"
        if isinstance(event, ToolProgress):
            return f"{who}⏳ {event.name} {render_progress(event)}"
        if isinstance(event, ToolResultEvent):
            return f"{who}🎯 {event.name} → {_preview(event.output)}"
        if isinstance(event, Compacted):
            return (
                f"{who}🗜  Context compacted: {event.before_tokens} → {event.after_tokens} "
                f"tokens (window {event.window}; {event.stubbed} tool outputs or arguments "
                f"shortened, {event.summarized} messages summarized or dropped)"
            )
        if isinstance(event, UsageReport) and self.show_usage:
            return f"{who}   tokens: {event.usage}"
        if isinstance(event, PlanChanged):
            return render_plan_change(event)
        return None


def render_plan_change(event: PlanChanged) -> str | None:
    """A planning flow's progress: the plan when made or revised, each step as it runs."""
    if event.change == "plan_created":
        return f"\n{event.plan_text}\n"
    if event.change == "plan_updated":
        return f"\nPlan revised:\n{event.plan_text}\n"
    if event.change == "step_started":
        return f"▶ Step {event.step_index} of {event.total_steps} → {event.agent}: {event.step}"
    if event.change == "step_finished":
        mark = "✓" if event.status == "completed" else "✗"
        note = f" — {event.note}" if event.note else ""
        return f"{mark} Step {event.step_index} {event.status}{note}"
    return None


def render_progress(event: ToolProgress) -> str:
    """``3/5 (60%) message``, or ``3 message`` when the total is unknown."""
    done = f"{event.progress:g}"
    if event.total:
        percent = max(0.0, min(100.0, 100.0 * event.progress / event.total))
        done = f"{done}/{event.total:g} ({percent:.0f}%)"
    message = f" {_preview(event.message)}" if event.message else ""
    return done + message


def _preview(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    text = text.replace("\n", " ")
    return text if len(text) <= _PREVIEW else text[:_PREVIEW] + "…"
