"""Typed events agents and flows emit, and the bus that delivers them: one stream feeds every
view of a run, so they cannot disagree; a run nobody watches builds none (``bus.active``)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from app.llm.usage import Usage
from app.logger import logger

if TYPE_CHECKING:
    from app.agent.result import RunResult  # plain data; named here for type checkers only


@dataclass(frozen=True, slots=True)
class Event:
    """Something that happened; ``source`` is the agent's (or flow's) name."""

    kind: ClassVar[str] = "event"
    _registry: ClassVar[dict[str, type[Event]]] = {}

    source: str

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # No zero-argument super() here: slotted dataclasses are rebuilt as new classes.
        if cls.kind != "event":
            Event._registry[cls.kind] = cls

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict (``kind`` plus the fields); live objects are left out."""
        data: dict[str, Any] = {"kind": self.kind}
        for item in dataclasses.fields(self):
            if not item.metadata.get("transient"):
                value = getattr(self, item.name)
                data[item.name] = value.model_dump() if isinstance(value, Usage) else value
        return data


@dataclass(frozen=True, slots=True)
class RunStarted(Event):
    kind: ClassVar[str] = "run_started"
    prompt: str | None = None
    max_steps: int = 0
    resumed: bool = False


@dataclass(frozen=True, slots=True)
class StepStarted(Event):
    kind: ClassVar[str] = "step_started"
    step: int = 0
    max_steps: int = 0


@dataclass(frozen=True, slots=True)
class TextDelta(Event):
    """A piece of the model's answer as it is generated (streaming)."""

    kind: ClassVar[str] = "text_delta"
    step: int = 0
    text: str = ""


@dataclass(frozen=True, slots=True)
class Thought(Event):
    """The model's whole text for this step (after any deltas)."""

    kind: ClassVar[str] = "thought"
    step: int = 0
    text: str = ""


@dataclass(frozen=True, slots=True)
class Reasoning(Event):
    """The model's reasoning for this step (``reasoning_content`` or a ``<think>`` block):
    shown as thinking, never taken as the answer nor stored in the agent's memory."""

    kind: ClassVar[str] = "reasoning"
    step: int = 0
    text: str = ""


@dataclass(frozen=True, slots=True)
class ToolCallEvent(Event):
    kind: ClassVar[str] = "tool_call"
    step: int = 0
    call_id: str = ""
    name: str = ""
    arguments: str = ""


@dataclass(frozen=True, slots=True)
class ToolProgress(Event):
    """A running tool reported how far it got (e.g. an MCP server's progress notification);
    ``total`` and ``message`` are None when the tool did not say."""

    kind: ClassVar[str] = "tool_progress"
    step: int = 0
    call_id: str = ""
    name: str = ""
    progress: float = 0.0
    total: float | None = None
    message: str | None = None


@dataclass(frozen=True, slots=True)
class ToolResultEvent(Event):
    kind: ClassVar[str] = "tool_result"
    step: int = 0
    call_id: str = ""
    name: str = ""
    output: str = ""
    error: bool = False
    #: Seconds the call ran (None when not measured), for traces.
    duration: float | None = None
    #: The call was cut short (Stop, Ctrl-C): ``output`` is what it printed until then.
    cancelled: bool = False
    #: A screenshot the tool returned (base64), for live views; never written to sessions.
    image: str | None = field(default=None, compare=False, repr=False, metadata={"transient": True})


@dataclass(frozen=True, slots=True)
class StepFinished(Event):
    """The step is complete and its messages are in memory (a safe point to persist)."""

    kind: ClassVar[str] = "step_finished"
    step: int = 0
    result: str = ""


@dataclass(frozen=True, slots=True)
class UsageReport(Event):
    """Tokens of one LLM call (``usage``) and of the run so far; cost when prices are known.
    ``model``, ``finish_reason`` and ``duration`` (seconds) describe the call when known."""

    kind: ClassVar[str] = "usage"
    step: int = 0
    usage: Usage | None = None
    run_usage: Usage | None = None
    cost: float | None = None
    run_cost: float | None = None
    model: str = ""
    finish_reason: str | None = None
    duration: float | None = None


#: What happened to a flow's plan (``PlanChanged.change``).
PlanChange = Literal[
    "plan_created",  # the plan exists (plan_text shows it)
    "step_started",  # step_index/step/agent: an agent took the step
    "step_finished",  # status is "completed" or "blocked"; note says why/what
    "plan_updated",  # the plan was revised after a blocked step
    "summary",  # note holds the final summary
]


@dataclass(frozen=True, slots=True)
class PlanChanged(Event):
    """A planning flow's progress: ``change`` says what happened (a ``PlanChange``) and
    ``plan_text`` is the plan as it stands afterwards."""

    kind: ClassVar[str] = "plan"
    change: str = ""
    plan_id: str = ""
    plan_text: str = ""
    step_index: int | None = None
    step: str | None = None
    agent: str | None = None
    status: str | None = None
    note: str | None = None
    total_steps: int = 0


@dataclass(frozen=True, slots=True)
class Compacted(Event):
    """The conversation was made smaller to fit the model's context window."""

    kind: ClassVar[str] = "compaction"
    step: int = 0
    before_tokens: int = 0
    after_tokens: int = 0
    window: int = 0
    stubbed: int = 0
    summarized: int = 0


@dataclass(frozen=True, slots=True)
class ErrorEvent(Event):
    kind: ClassVar[str] = "error"
    step: int = 0
    message: str = ""
    error_type: str = ""


@dataclass(frozen=True, slots=True)
class RunFinished(Event):
    """The run ended; ``result`` (in memory only, not in session files) is what ``run()``
    returns, ``stop_reason`` a ``StopReason`` value, ``failure`` why it did not complete."""

    kind: ClassVar[str] = "run_finished"
    state: str = ""
    steps: int = 0
    final_answer: str | None = None
    usage: Usage | None = None
    cost: float | None = None
    stop_reason: str = ""
    failure: str | None = None
    result: RunResult | None = field(
        default=None, compare=False, repr=False, metadata={"transient": True}
    )


def event_from_json(data: dict[str, Any]) -> Event | None:
    """Rebuild an event written by ``to_json`` (None for an unknown kind)."""
    cls = Event._registry.get(str(data.get("kind")))
    if cls is None:
        return None
    names = {f.name for f in dataclasses.fields(cls)}
    values = {k: v for k, v in data.items() if k in names}
    for key in ("usage", "run_usage"):  # UsageReport, RunFinished
        if isinstance(values.get(key), dict):
            values[key] = Usage(**values[key])
    try:
        return cls(**values)
    except TypeError:
        return None


#: A listener may be a plain function or a coroutine function.
Listener = Callable[[Event], Awaitable[None] | None]


class EventBus:
    """Delivers events to listeners in subscription order; a failing listener is logged and
    skipped, never fatal to the run."""

    __slots__ = ("_listeners",)

    def __init__(self) -> None:
        self._listeners: list[Listener] = []

    @property
    def active(self) -> bool:
        """Whether anyone listens (emitters skip building events otherwise)."""
        return bool(self._listeners)

    @property
    def watched(self) -> bool:
        """Whether a listener shows the run: the model's text is then streamed to it and the
        log stays quiet. A listener with ``passive = True`` (traces) only records."""
        return any(not getattr(listener, "passive", False) for listener in self._listeners)

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Add ``listener``; returns a function that removes it again."""
        self._listeners.append(listener)
        return lambda: self.unsubscribe(listener)

    def unsubscribe(self, listener: Listener) -> None:
        with contextlib.suppress(ValueError):
            self._listeners.remove(listener)

    async def emit(self, event: Event) -> None:
        for listener in tuple(self._listeners):
            try:
                outcome = listener(event)
                if inspect.isawaitable(outcome):
                    await outcome
            except Exception as e:
                logger.warning(f"Event listener {listener!r} failed on {event.kind}: {e}")


class EventStream:
    """The events ``bus`` delivers while ``work`` runs (started by the iteration), as an async
    iterator; ``async with`` (or ``aclose()``) makes leaving the loop early stop the work at
    once rather than when it is collected."""

    def __init__(self, bus: EventBus, work: Awaitable[Any]) -> None:
        self._bus = bus
        self._work: Awaitable[Any] | None = work
        self._queue: asyncio.Queue[Event | None] = asyncio.Queue()
        self._task: asyncio.Future[Any] | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self._done = False

    def _start(self) -> None:
        if self._task is None and self._work is not None:
            self._unsubscribe = self._bus.subscribe(self._queue.put_nowait)
            self._task = asyncio.ensure_future(self._work)
            self._task.add_done_callback(lambda _: self._queue.put_nowait(None))
            self._work = None

    def __aiter__(self) -> EventStream:
        return self

    async def __anext__(self) -> Event:
        if self._done:
            raise StopAsyncIteration
        self._start()
        event = await self._queue.get()
        if event is None:
            self._done = True
            self._detach()
            assert self._task is not None
            await self._task  # raises what the work raised (misuse, for example)
            raise StopAsyncIteration
        return event

    async def __aenter__(self) -> EventStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop the work if it is still going (its cleanup runs) and stop listening."""
        self._done = True
        self._detach()
        if self._work is not None and inspect.iscoroutine(self._work):
            self._work.close()  # never started
            self._work = None
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def _detach(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
