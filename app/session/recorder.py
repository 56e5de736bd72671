"""Turning a run's events into session records, step by step.

At every safe point (a run starts, a step finishes, a run ends) the recorder appends the new
messages (the whole memory once after a rewrite such as compaction), the events seen meanwhile
and a checkpoint, then flushes. A text is stored in full once, in its message record; events
and run records repeat it cut to ``max_text_chars``, so a 20 MB answer is not stored 5 times.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from app.config import LimitsSettings, config
from app.events import (
    Compacted,
    Event,
    PlanChanged,
    RunFinished,
    RunStarted,
    StepFinished,
    TextDelta,
)
from app.session.writer import SessionWriter

if TYPE_CHECKING:
    from collections.abc import Callable

    from app.agent.base import BaseAgent
    from app.exceptions import SessionWriteError
    from app.schema import Message

#: Ends a text cut in an event or run record (its full text is in the message records).
STORED_CUT = "… [cut for storage: {total} characters in all]"


def message_record(message: Message) -> dict[str, Any]:
    """A message as stored: its wire fields; an image is noted, not stored (size)."""
    data = message.to_dict()
    dropped = [data.pop("base64_image", None), data.pop("images", None)]
    if any(dropped):
        data["image_omitted"] = True
    return data


@dataclass
class _Tracked:
    agent: BaseAgent
    key: str
    written: int = 0
    first: Any = None
    last: Any = None
    rewrite: bool = False


class SessionRecorder:
    """Writes the history of the agents (and flow) attached to it into one session file."""

    def __init__(
        self, writer: SessionWriter, session_id: str, *, max_text_chars: int | None = None
    ) -> None:
        self.writer = writer
        self.session_id = session_id
        #: Longest text repeated in events and run records (None: ``[limits]``'s).
        self.max_text_chars = max_text_chars if max_text_chars is not None else _stored_limit()
        self._tracked: dict[str, _Tracked] = {}
        self._unsubscribers: list[Callable[[], None]] = []

    @property
    def path(self) -> Any:
        return self.writer.path

    @property
    def error(self) -> SessionWriteError | None:
        """Why writing the session failed (records from then on are lost), else None."""
        return self.writer.error

    # ---- attaching -----------------------------------------------------------------------------

    def attach_agent(
        self, agent: BaseAgent, key: str | None = None, *, already_written: bool = False
    ) -> None:
        """Record ``agent``'s runs under ``key`` (default: its name). ``already_written``
        means its current memory is in the file already (a resumed session)."""
        tracked = _Tracked(agent=agent, key=key or agent.name)
        if already_written:
            self._mark_written(tracked)
        self._tracked[tracked.key] = tracked
        self._unsubscribers.append(agent.events.subscribe(partial(self._on_agent_event, tracked)))

    def attach_flow(self, flow: Any, *, already_written: bool = False) -> None:
        """Record a planning flow: each of its agents, and its plan whenever it changes."""
        for key, agent in flow.agents.items():
            self.attach_agent(agent, key, already_written=already_written)
        self._unsubscribers.append(flow.events.subscribe(partial(self._on_flow_event, flow)))

    def detach(self) -> None:
        for unsubscribe in self._unsubscribers:
            unsubscribe()
        self._unsubscribers.clear()

    async def close(self) -> None:
        self.detach()
        await self.writer.flush()
        self.writer.close()

    # ---- records -------------------------------------------------------------------------------

    def note(self, record_type: str, **fields: Any) -> None:
        """Add a record of the caller's own (e.g. the task a terminal program was given)."""
        self.writer.add({"type": record_type, "t": round(time.time(), 3), **fields})

    async def flush(self) -> None:
        await self.writer.flush()

    async def _on_agent_event(self, tracked: _Tracked, event: Event) -> None:
        if isinstance(event, TextDelta):
            return
        if isinstance(event, Compacted):
            tracked.rewrite = True
        if isinstance(event, RunStarted):
            self._sync_memory(tracked)
            self.note(
                "run_started",
                agent=tracked.key,
                prompt=self._preview(event.prompt),
                max_steps=event.max_steps,
                resumed=event.resumed,
            )
            await self.writer.flush()
            return
        self.note("event", agent=tracked.key, event=self._shorten(event.to_json()))
        if isinstance(event, StepFinished | RunFinished):
            self._sync_memory(tracked)
            self._checkpoint(tracked)
            if isinstance(event, RunFinished):
                # A run cancelled (Ctrl-C) ends with no stop reason and not in ERROR:
                # recorded as interrupted, so ``--resume`` carries it on.
                interrupted = not event.stop_reason and event.state != "ERROR"
                self.note(
                    "run_finished",
                    agent=tracked.key,
                    state=event.state,
                    steps=event.steps,
                    final_answer=self._preview(event.final_answer),
                    **({"interrupted": True} if interrupted else {}),
                )
            await self.writer.flush()

    async def _on_flow_event(self, flow: Any, event: Event) -> None:
        if not isinstance(event, PlanChanged):
            return
        plans = flow.planning_tool.plans  # encoded as the record is added: no copy needed
        self.note("plan", active_plan_id=flow.active_plan_id, plans=plans, change=event.change)
        if event.change == "summary":
            self.note("flow_finished", summary=event.note)
        await self.writer.flush()

    def _preview(self, text: str | None) -> str | None:
        """``text`` as repeated in a record: cut to ``max_text_chars`` with a marker."""
        limit = self.max_text_chars
        if text is None or len(text) <= limit:
            return text
        return text[:limit] + STORED_CUT.format(total=len(text))

    def _shorten(self, data: dict[str, Any]) -> dict[str, Any]:
        """An event's fields with every long text cut (see ``_preview``)."""
        return {key: self._preview(v) if isinstance(v, str) else v for key, v in data.items()}

    def _checkpoint(self, tracked: _Tracked) -> None:
        agent = tracked.agent
        usage = getattr(agent, "_run_usage", None)
        self.note(
            "checkpoint",
            agent=tracked.key,
            name=agent.name,
            step=agent.current_step,
            max_steps=agent.max_steps,
            state=agent.state.value,
            usage=usage.model_dump() if usage is not None else None,
        )

    def _sync_memory(self, tracked: _Tracked) -> None:
        messages = tracked.agent.memory.messages
        n = tracked.written
        extended = (
            not tracked.rewrite
            and len(messages) >= n
            and (n == 0 or (messages[0] is tracked.first and messages[n - 1] is tracked.last))
        )
        if extended:
            for message in messages[n:]:
                self.writer.add(
                    {"type": "message", "agent": tracked.key, "message": message_record(message)}
                )
        else:
            self.note("memory", agent=tracked.key, messages=[message_record(m) for m in messages])
        self._mark_written(tracked)

    @staticmethod
    def _mark_written(tracked: _Tracked) -> None:
        messages = tracked.agent.memory.messages
        tracked.written = len(messages)
        tracked.first = messages[0] if messages else None
        tracked.last = messages[-1] if messages else None
        tracked.rewrite = False


def _stored_limit() -> int:
    """``[limits] max_stored_text_chars`` of the loaded config, else its default."""
    if config.is_loaded:
        return config.app_config.limits.max_stored_text_chars
    return int(LimitsSettings.model_fields["max_stored_text_chars"].default)
