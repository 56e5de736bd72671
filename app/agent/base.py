"""``BaseAgent``: state machine, memory and the step loop every agent shares."""

from __future__ import annotations

import asyncio
import contextlib
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from pydantic import ConfigDict, Field, PrivateAttr, model_validator

from app.agent.result import RunResult, StopReason
from app.events import (
    ErrorEvent,
    EventBus,
    EventStream,
    Listener,
    RunFinished,
    RunStarted,
    StepFinished,
    StepStarted,
    UsageReport,
)
from app.exceptions import AgentStateError, ContextWindowExceededError, LLMError
from app.llm import LLM, Usage, model_argument
from app.logger import log_enabled, logger
from app.prompt.toolcall import STUCK_PROMPT
from app.schema import ROLE_TYPE, AgentState, Memory, Message
from app.strict import StrictModel


def _default_llm(name: object) -> LLM:
    """The LLM profile named after the agent, else the default one (``LLM`` falls back)."""
    return LLM(config_name=name.lower() if isinstance(name, str) else "default")


class BaseAgent(StrictModel, ABC):
    """Runs ``step()`` until the agent finishes (FINISHED), fails (ERROR) or stops at
    ``max_steps`` or an interruption (IDLE); ``RunResult.stop_reason`` says why. A second
    ``run()`` is a follow-up: the memory is kept and the step budget starts afresh.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid", defer_build=True)

    name: str = Field(..., description="Unique name of the agent")
    description: str | None = Field(default=None, description="What the agent is for")

    system_prompt: str | None = Field(default=None, description="System-level instruction")
    next_step_prompt: str | None = Field(default=None, description="Prompt for the next action")

    llm: LLM = Field(
        default_factory=lambda data: _default_llm(data.get("name")),
        description="Language model instance (default: the profile named after the agent)",
    )
    memory: Memory = Field(default_factory=Memory, description="The agent's memory")
    state: AgentState = Field(default=AgentState.IDLE, description="Current agent state")

    max_steps: int = Field(default=10, description="Maximum steps before termination")
    current_step: int = Field(default=0, description="Current step in execution")

    duplicate_threshold: int = 2
    #: Stuck hints given in a row before a model that keeps repeating itself fails the run.
    max_stuck_hints: int = 2

    _stuck_hint: str | None = PrivateAttr(default=None)
    _stuck_hints: int = PrivateAttr(default=0)
    _stop_reason: StopReason | None = PrivateAttr(default=None)
    _failure: str | None = PrivateAttr(default=None)
    # Set in model_post_init, not by default factories: pydantic inspects a factory's signature
    # at every instantiation (0.2 ms for a builtin such as ``list``).
    _run_usage: Usage = PrivateAttr()
    _events: EventBus = PrivateAttr()

    def model_post_init(self, context: Any, /) -> None:
        self._run_usage = Usage()
        self._events = EventBus()

    @model_validator(mode="before")
    @classmethod
    def _model_as_llm(cls, data: Any) -> Any:
        """``model=`` takes any ``app.llm.Model`` (docs/llm.md, Bring your own model)."""
        return model_argument(data)

    @model_validator(mode="after")
    def initialize_agent(self) -> BaseAgent:
        """Upstream's validator (subclasses' own run after it)."""
        if not isinstance(self.memory, Memory):
            self.memory = Memory()
        return self

    # ---- state -------------------------------------------------------------------------------

    @asynccontextmanager
    async def state_context(self, new_state: AgentState) -> AsyncIterator[None]:
        """Enter ``new_state`` for the block; a state set inside the block (FINISHED, ERROR)
        is kept afterwards, otherwise the previous state returns."""
        if not isinstance(new_state, AgentState):
            raise ValueError(f"Invalid state: {new_state}")
        previous = self.state
        self.state = new_state
        try:
            yield
        except BaseException as e:
            # Interruption leaves the agent ready for another run; a real failure is ERROR.
            self.state = AgentState.ERROR if isinstance(e, Exception) else AgentState.IDLE
            raise
        if self.state == new_state:
            self.state = previous

    def update_memory(
        self, role: ROLE_TYPE, content: str, base64_image: str | None = None, **kwargs: Any
    ) -> None:
        """Add a message by role (upstream's helper)."""
        if role == "user":
            message = Message.user_message(content, base64_image=base64_image)
        elif role == "system":
            message = Message.system_message(content)
        elif role == "assistant":
            message = Message.assistant_message(content, base64_image=base64_image)
        elif role == "tool":
            message = Message.tool_message(content, base64_image=base64_image, **kwargs)
        else:
            raise ValueError(f"Unsupported message role: {role}")
        self.memory.add_message(message)

    # ---- events ------------------------------------------------------------------------------

    @property
    def events(self) -> EventBus:
        """The agent's events (see ``app.events``): ``agent.events.subscribe(callback)``."""
        return self._events

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(event)`` for every event; returns a function that unsubscribes."""
        return self._events.subscribe(listener)

    def run_stream(self, request: str | None = None) -> EventStream:
        """``run(request)``, yielding its events as they happen. The last one is
        ``RunFinished``, whose ``result`` is what ``run()`` returns."""
        return EventStream(self._events, self.run(request))

    # ---- the loop ----------------------------------------------------------------------------

    async def run(self, request: str | None = None) -> RunResult:
        """Run the agent on ``request`` (added to memory as a user message)."""
        return await self._run(request, resume=False)

    async def resume(self) -> RunResult:
        """Carry on a run that was cut short (restored from a session): no new prompt, and
        the step count goes on from ``current_step`` within the same ``max_steps``."""
        return await self._run(None, resume=True)

    async def _run(self, request: str | None, *, resume: bool) -> RunResult:
        if self.state == AgentState.RUNNING:
            raise AgentStateError(f"Agent '{self.name}' is already running")
        if self.state != AgentState.IDLE:
            self.state = AgentState.IDLE  # a follow-up after FINISHED or ERROR
        if not resume:
            self.current_step = 0
            self._run_usage = Usage()
        self._stuck_hint = None
        self._stuck_hints = 0
        self._stop_reason = None
        self._failure = None
        self._begin_run()
        if request:
            self.update_memory("user", request)
        bus = self._events
        if bus.active:
            await bus.emit(
                RunStarted(self.name, prompt=request, max_steps=self.max_steps, resumed=resume)
            )

        results: list[str] = []
        error: BaseException | None = None
        try:
            async with self.state_context(AgentState.RUNNING):
                while self.current_step < self.max_steps and self.state == AgentState.RUNNING:
                    self.current_step += 1
                    # When someone listens, they show the progress; the log keeps it at DEBUG.
                    level = "DEBUG" if bus.watched else "INFO"
                    if log_enabled(level):
                        logger.log(level, f"Executing step {self.current_step}/{self.max_steps}")
                    if bus.active:
                        await bus.emit(
                            StepStarted(self.name, step=self.current_step, max_steps=self.max_steps)
                        )
                    try:
                        step_result = await self.step()
                    except LLMError as e:  # after its retries: the run fails, with the reason
                        error = e
                        await self._step_failed(e, results)
                        break
                    if self.state == AgentState.RUNNING:
                        self._watch_repeats()
                    results.append(f"Step {self.current_step}: {step_result}")
                    if bus.active:
                        await bus.emit(
                            StepFinished(self.name, step=self.current_step, result=step_result)
                        )
                    if self._stop_reason is not None and self._failure is not None:
                        await self._announce_failure()

                if self.current_step >= self.max_steps and self.state == AgentState.RUNNING:
                    results.append(f"Terminated: Reached max steps ({self.max_steps})")
                    logger.warning(f"Agent '{self.name}' stopped at max_steps={self.max_steps}")
                    self._stop_reason = StopReason.MAX_STEPS
                    self._failure = (
                        f"stopped at max_steps={self.max_steps} without finishing the task"
                    )
        except BaseException as e:
            if bus.active:
                await self._emit_interrupted(e)
            raise

        log = "\n".join(results) if results else "No steps executed"
        reason = self._stop_reason
        if reason is None:  # a subclass set the state itself
            reason = {
                AgentState.FINISHED: StopReason.COMPLETED,
                AgentState.ERROR: StopReason.ERROR,
            }.get(self.state, StopReason.MAX_STEPS)
        result = RunResult(
            log,
            final_answer=self.final_answer(),
            state=self.state,
            steps=self.current_step,
            step_results=results,
            usage=self._run_usage.model_copy(),
            error=error,
            stop_reason=reason,
            failure=self._failure,
        )
        if bus.active:
            await bus.emit(
                RunFinished(
                    self.name,
                    state=self.state.value,
                    steps=self.current_step,
                    final_answer=result.final_answer,
                    usage=result.usage,
                    cost=result.usage.cost,
                    stop_reason=result.stop_reason.value,
                    failure=result.failure,
                    result=result,
                )
            )
        return result

    # ---- failures ------------------------------------------------------------------------------

    def fail(self, reason: StopReason, message: str) -> None:
        """End the run after this step as a failure (ERROR state) for ``reason``; ``message``
        is what the user is told (``RunResult.failure``)."""
        self._stop_reason = reason
        self._failure = message
        self.state = AgentState.ERROR
        logger.warning(f"Agent '{self.name}' stopped: {message}")

    @property
    def stop_reason(self) -> StopReason | None:
        """Why the current (or last) run stopped, once a step decided it."""
        return self._stop_reason

    async def _announce_failure(self, error_type: str | None = None) -> None:
        if self._events.active:
            assert self._stop_reason is not None
            await self._events.emit(
                ErrorEvent(
                    self.name,
                    step=self.current_step,
                    message=self._failure or "",
                    error_type=error_type or self._stop_reason.value,
                )
            )

    async def _step_failed(self, error: LLMError, results: list[str]) -> None:
        """The model failed (after the LLM layer's retries: unreachable, refused, a malformed
        reply, a request too long even after compaction): the run ends in ERROR with the
        reason. Other exceptions are bugs in an agent and propagate."""
        logger.error(f"Step {self.current_step} failed: {error}")
        results.append(f"Step {self.current_step}: Error: {error}")
        self.state = AgentState.ERROR
        overflow = isinstance(error, ContextWindowExceededError)
        self._stop_reason = StopReason.CONTEXT_OVERFLOW if overflow else StopReason.ERROR
        self._failure = str(error)
        await self._announce_failure(type(error).__name__)

    async def _emit_interrupted(self, error: BaseException) -> None:
        """A run cut short by cancellation or a crash still tells its listeners how it ended
        (shielded: a cancelled task may not await anything else)."""
        state = AgentState.IDLE if not isinstance(error, Exception) else AgentState.ERROR
        event = RunFinished(
            self.name,
            state=state.value,
            steps=self.current_step,
            usage=self._run_usage.model_copy(),
            cost=self._run_usage.cost,
        )
        with contextlib.suppress(BaseException):
            await asyncio.shield(self._events.emit(event))

    def _begin_run(self) -> None:
        """Hook for subclasses: reset per-run bookkeeping before the first step."""

    def final_answer(self) -> str | None:
        """The run's answer for library callers; agents that know better override this."""
        return None

    async def report_usage(
        self,
        usage: Usage | None,
        *,
        model: str = "",
        finish_reason: str | None = None,
        duration: float | None = None,
    ) -> None:
        """Add one LLM call's usage to this run's total and tell the listeners (per step and
        per run). The usage comes with the call's response (``ModelResponse.usage``); the
        call's ``model``, ``finish_reason`` and ``duration`` go to the listeners (traces)."""
        if usage is None:
            return
        self._run_usage.add(usage)
        if self._events.active:
            run = self._run_usage.model_copy()
            await self._events.emit(
                UsageReport(
                    self.name,
                    step=self.current_step,
                    usage=usage.model_copy(),
                    run_usage=run,
                    cost=usage.cost,
                    run_cost=run.cost,
                    model=model,
                    finish_reason=finish_reason,
                    duration=duration,
                )
            )

    @abstractmethod
    async def step(self) -> str:
        """One step of the agent's work; returns a line for the step log."""

    # ---- stuck detection ---------------------------------------------------------------------

    def is_stuck(self) -> bool:
        """True when the model's last answer repeats, unchanged, ``duplicate_threshold`` times
        in a row (same text and same tool calls)."""
        threshold = max(self.duplicate_threshold, 1)
        return self._repeat_count(most=threshold + 1) > threshold

    def _watch_repeats(self) -> None:
        """Hint a repeating model to change course; fail the run when the hints do not help."""
        if not self.is_stuck():
            self._stuck_hints = 0
            return
        if self._stuck_hints >= self.max_stuck_hints:
            self.fail(
                StopReason.STUCK, f"the model repeated the same action {self._repeat_count()} times"
            )
            return
        self._stuck_hints += 1
        self.handle_stuck_state()

    def _repeat_count(self, most: int = 0) -> int:
        """How many times in a row the model's last answer was given; stops counting at
        ``most`` (if set), so the stuck check at every step is O(threshold), not O(history)."""
        last: object = None
        count = 0
        for message in reversed(self.memory.messages):
            if message.role != "assistant":
                continue
            signature = _signature(message)
            if count == 0:
                if signature is None:
                    return 0
                last = signature
            elif signature != last:
                break
            count += 1
            if count == most:
                break
        return count

    def handle_stuck_state(self) -> None:
        """Add a one-off hint to the next request; it is not kept in the prompts afterwards."""
        logger.warning(f"Agent '{self.name}' detected a stuck state; adding a hint")
        self._stuck_hint = STUCK_PROMPT

    def take_stuck_hint(self) -> str | None:
        hint, self._stuck_hint = self._stuck_hint, None
        return hint

    # ---- upstream conveniences -------------------------------------------------------------------

    @property
    def messages(self) -> list[Message]:
        return self.memory.messages

    @messages.setter
    def messages(self, value: list[Message]) -> None:
        self.memory.messages = value

    async def cleanup(self) -> None:
        """Release resources held by the agent (tools, sessions)."""

    async def __aenter__(self) -> BaseAgent:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.cleanup()


def _signature(message: Message) -> tuple[str, tuple[tuple[str, str], ...]] | None:
    content = (message.content or "").strip()
    calls = tuple(
        (call.function.name, call.function.arguments) for call in (message.tool_calls or [])
    )
    if not content and not calls:
        return None
    return content, calls
