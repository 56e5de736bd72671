"""``ToolCallAgent``: the model picks tools by function calling; the agent runs them."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from contextvars import ContextVar
from dataclasses import replace
from functools import lru_cache
from typing import Any

from pydantic import Field, PrivateAttr

from app.agent.compaction import Compactor
from app.agent.react import ReActAgent
from app.agent.result import StopReason
from app.config import CompactionSettings, LimitsSettings, config
from app.events import Reasoning, TextDelta, Thought, ToolCallEvent, ToolProgress, ToolResultEvent
from app.exceptions import ContextWindowExceededError
from app.llm import Usage
from app.llm.arguments import parse_arguments
from app.llm.model import ModelResponse
from app.logger import log_enabled, logger, redact_registered
from app.prompt.toolcall import (
    CONTINUE_PROMPT,
    CUT_ARGUMENTS_ERROR,
    EMPTY_REPLY_PROMPT,
    NEXT_STEP_PROMPT,
    NOT_RUN_ERROR,
    REQUIRED_TOOL_PROMPT,
    SYSTEM_PROMPT,
)
from app.schema import ROLE_TYPE, TOOL_CHOICE_TYPE, AgentState, Message, ToolCall, ToolChoice
from app.tool.base import ToolFailure, ToolOutcome, ToolResult, format_output, result_failed
from app.tool.concurrency import plan_batches
from app.tool.create_chat_completion import CreateChatCompletion
from app.tool.progress import ToolCallContext, tool_call_context
from app.tool.terminate import Terminate
from app.tool.tool_collection import ToolCollection

#: Upstream's message for "tool_choice is required but the model called none" (kept for
#: code that imports it; here such a reply gets REQUIRED_TOOL_PROMPT and another try).
TOOL_CALL_REQUIRED = "Tool calls required but none provided"

_LOG_PREVIEW = 300
_NONE, _REQUIRED = ToolChoice.NONE.value, ToolChoice.REQUIRED.value
_CURRENT_IMAGE: ContextVar[str | None] = ContextVar("tool_call_image", default=None)


class ToolCallAgent(ReActAgent):
    """Each step asks the model for tool calls, runs them and records the results in order
    (docs/agents.md). A text answer, or a successful call of an answer tool, ends the run
    (unless ``text_answer_ends_run`` is False, as upstream); empty or cut replies are retried.
    """

    name: str = "toolcall"
    description: str = "an agent that can execute tool calls."

    system_prompt: str = SYSTEM_PROMPT
    next_step_prompt: str = NEXT_STEP_PROMPT

    available_tools: ToolCollection = Field(
        default_factory=lambda: ToolCollection(CreateChatCompletion(), Terminate())
    )
    tool_choices: TOOL_CHOICE_TYPE = ToolChoice.AUTO.value
    special_tool_names: list[str] = Field(
        default_factory=lambda: [Terminate.model_fields["name"].default]
    )

    #: Tools whose successful result is the final answer (they end the run like terminate).
    answer_tool_names: list[str] = Field(
        default_factory=lambda: [CreateChatCompletion.model_fields["name"].default]
    )

    tool_calls: list[ToolCall] = []  # copied per instance by pydantic
    #: Context compaction (see ``app.agent.compaction``); None: the config's ``[compaction]``.
    compaction: CompactionSettings | None = None
    #: Empty replies (no text, no tool call) in a row before the run fails.
    max_empty_replies: int = 3
    #: Times in a row an answer cut at ``max_tokens`` is continued before the run fails.
    max_continuations: int = 2
    #: Tool calls of one reply that run (the rest are answered "not run"); None: the
    #: config's ``[limits] max_tool_calls_per_reply``.
    max_tool_calls_per_reply: int | None = Field(default=None, ge=1)
    _compactor: Compactor | None = PrivateAttr(default=None)
    _final_answer: str | None = PrivateAttr(default=None)
    _last_text: str | None = PrivateAttr(default=None)
    _last_usage: Usage | None = PrivateAttr(default=None)
    _call_seconds: float | None = PrivateAttr(default=None)  # the last model call's
    _tool_seconds: dict[str, float] = PrivateAttr(default_factory=dict)  # by call id
    _notes: list[str] = PrivateAttr()  # one-off notes for the next request
    _step_notes: list[str] = PrivateAttr()  # ... taken for this step
    _step_note: str | None = PrivateAttr(default=None)  # the step log line when think is False
    _empty_replies: int = PrivateAttr(default=0)
    _partial: list[str] = PrivateAttr()  # parts of a cut answer
    _reply_cut: bool = PrivateAttr(default=False)

    def model_post_init(self, context: Any, /) -> None:
        super().model_post_init(context)
        self._notes, self._step_notes, self._partial = [], [], []

    max_steps: int = 30
    max_observe: int | bool | None = None
    text_answer_ends_run: bool = True
    #: Run consecutive read-only calls of one message at the same time (see
    #: ``app.tool.concurrency``); False runs every call in order, one at a time.
    concurrent_tool_calls: bool = True

    # ---- think ---------------------------------------------------------------------------------

    def add_note(self, text: str) -> None:
        """Tell the model ``text`` in the next request only (before the next-step prompt);
        the note is not stored in memory."""
        if text not in self._notes:
            self._notes.append(text)

    def _with_step_prompt(self, memory: list[Message]) -> list[Message]:
        """``memory`` plus this step's prompt: the next-step prompt (and any one-off note) is
        sent with the request but not stored, so it never piles up in the history."""
        prompts = [p for p in (*self._step_notes, self.next_step_prompt) if p]
        if not prompts:
            return list(memory)
        return [*memory, _prompt_message("user", "\n\n".join(prompts))]

    def _request_messages(self) -> list[Message]:
        return self._with_step_prompt(self.messages)

    def _system_messages(self) -> list[Message] | None:
        return [_prompt_message("system", self.system_prompt)] if self.system_prompt else None

    def compaction_request(
        self, memory: list[Message]
    ) -> tuple[list[Message], list[Message] | None, list[dict[str, Any]]]:
        """What a request over ``memory`` would hold: messages, system prompt and tools."""
        return (
            self._with_step_prompt(memory),
            self._system_messages(),
            self.available_tools.to_params(),
        )

    @property
    def compactor(self) -> Compactor:
        """This agent's compactor (``compaction``, else the config's ``[compaction]``)."""
        compactor = self._compactor
        if compactor is None:
            settings = self.compaction
            if settings is None:
                settings = config.app_config.compaction if config.is_loaded else None
            compactor = self._compactor = Compactor(settings)
        return compactor

    async def step(self) -> str:
        self._step_note = None
        if not await self.think():
            return self._step_note or "Thinking complete - no action needed"
        return await self.act()

    async def think(self) -> bool:
        choice = _choice_value(self.tool_choices)
        hint = self.take_stuck_hint()
        self._step_notes, self._notes = [*([hint] if hint else []), *self._notes], []
        await self.compactor.maybe_compact(self)
        reply = await self._request_turn(choice)
        return await self.process_reply(reply)

    async def _request_turn(self, choice: str) -> ModelResponse:
        """Ask the model; a request that overflows the context window is compacted (to the
        window the error names) and sent once more. A second overflow ends the step."""
        try:
            return await self._ask(choice)
        except ContextWindowExceededError as e:
            if not self.compactor.settings.enabled:
                raise
            logger.warning(
                f"The request of '{self.name}' does not fit the context window ({e}); compacting"
            )
            compacted = await self.compactor.compact_after_overflow(self, e)
            if compacted is None:
                raise _overflow(
                    e, "and compacting the conversation could not make it smaller"
                ) from e
            logger.info(
                f"Retrying the request of '{self.name}' once, compacted to "
                f"{compacted.after_tokens} tokens"
            )
        try:
            return await self._ask(choice)
        except ContextWindowExceededError as e:
            raise _overflow(e, "even after compacting the conversation") from e

    async def _ask(self, choice: str) -> ModelResponse:
        bus = self._events
        extra: dict[str, Any] = {}
        if bus.watched:  # someone watches: stream the text to them as it is written
            name, step = self.name, self.current_step

            async def on_delta(text: str) -> None:
                await bus.emit(TextDelta(name, step=step, text=text))

            extra["on_delta"] = on_delta
        started = time.monotonic()
        reply = await self.llm.request(
            self._request_messages(),
            system_msgs=self._system_messages(),
            tools=self.available_tools.to_params(),
            tool_choice=choice,
            **extra,
        )
        self._call_seconds = time.monotonic() - started
        return reply

    async def process_reply(self, reply: ModelResponse) -> bool:
        """Take one model turn into the run: record it, show it, and decide whether there is
        something to act on (False: the step ends here, ``_step_note`` says why)."""
        choice = _choice_value(self.tool_choices)
        bus = self._events
        self._last_usage = reply.usage
        seconds, self._call_seconds = self._call_seconds, None
        await self.report_usage(
            reply.usage,
            model=self.llm.model,
            finish_reason=reply.finish_reason,
            duration=seconds,
        )
        response = reply.message
        watched = bus.watched  # listeners show progress; the log then stays quiet
        reasoning = (reply.reasoning or "").strip()
        if reasoning:  # shown as thinking; never the answer, never stored
            if bus.active:
                await bus.emit(Reasoning(self.name, step=self.current_step, text=reasoning))
            if not watched and log_enabled("INFO"):
                logger.info(f"💭 {self.name} is thinking: {_preview(reasoning)}")

        tool_calls = list(response.tool_calls or [])
        content = response.content or ""
        if choice == _NONE and tool_calls:
            logger.warning(f"{self.name} asked for tools while tools are disabled; ignored")
            tool_calls = []
        if not content.strip() and not tool_calls:
            return self._empty_reply()
        self._empty_replies = 0
        self._reply_cut = reply.truncated
        if reply.truncated and not tool_calls:
            return await self._cut_answer(content)
        # A text answer may be the last part of one cut before.
        answer = content if tool_calls else "".join(self._partial) + content
        self._partial = []
        if content.strip():
            self._last_text = answer
        if content and not watched and log_enabled("INFO"):
            logger.info(f"✨ {self.name}'s thoughts: {content}")
        # A call naming no tool (a small model's garbled text) is no tool call to show: it
        # is answered as an unknown tool, so the model can correct itself.
        shown = [call for call in tool_calls if call.function.name.strip()]
        if len(shown) < len(tool_calls):
            logger.warning(f"{self.name}: the model wrote a tool call that names no tool")
        if shown and not watched and log_enabled("INFO"):
            names = ", ".join(call.function.name for call in shown)
            logger.info(f"🛠️ {self.name} selected {len(shown)} tool(s): {names}")
            for call in shown:
                logger.info(
                    f"🔧 {call.function.name} arguments: {_preview(call.function.arguments)}"
                )

        self.tool_calls = tool_calls  # none when tools are disabled (see above)
        # Thinking blocks go back to the model unchanged on the next turn (the API checks).
        thinking = response.thinking_blocks
        if tool_calls:
            self.memory.add_message(
                Message.from_tool_calls(tool_calls, content=content, thinking_blocks=thinking)
            )
        elif content:
            self.memory.add_message(
                Message(role="assistant", content=content, thinking_blocks=thinking)
            )
        if bus.active:
            if content:
                await bus.emit(Thought(self.name, step=self.current_step, text=content))
            for call in shown:
                await bus.emit(
                    ToolCallEvent(
                        self.name,
                        step=self.current_step,
                        call_id=call.id,
                        name=call.function.name,
                        arguments=call.function.arguments,
                    )
                )

        if choice == _REQUIRED:
            return True  # act() handles a missing call
        return bool(tool_calls or content)

    def _empty_reply(self) -> bool:
        """No text and no tool call: tell the model; fail after ``max_empty_replies``."""
        self._empty_replies += 1
        count = self._empty_replies
        self.tool_calls = []
        logger.warning(f"{self.name}: the model returned an empty reply ({count} in a row)")
        if count >= self.max_empty_replies:
            self.fail(
                StopReason.EMPTY_REPLIES, f"the model returned {count} empty replies in a row"
            )
        else:
            self.add_note(EMPTY_REPLY_PROMPT)
        self._step_note = "Error: the model returned an empty reply"
        return False

    async def _cut_answer(self, content: str) -> bool:
        """A text answer cut at ``max_tokens`` is not the answer: keep the part, ask the
        model to go on; after ``max_continuations`` cut parts in a row the run fails."""
        self.tool_calls = []
        self.memory.add_message(Message.assistant_message(content))
        self._partial.append(content)
        self._last_text = "".join(self._partial)
        if self._events.active:
            await self._events.emit(Thought(self.name, step=self.current_step, text=content))
        cuts = len(self._partial)
        logger.warning(f"{self.name}: the answer was cut at max_tokens ({cuts} in a row)")
        if cuts > self.max_continuations:
            self.fail(
                StopReason.TRUNCATED,
                f"the answer was cut at max_tokens (max_tokens={self.llm.max_tokens}) "
                f"{cuts} times in a row; raise max_tokens or ask for a shorter answer",
            )
        else:
            self.add_note(CONTINUE_PROMPT)
        self._step_note = "Error: the answer was cut at max_tokens; asked the model to continue"
        return False

    # ---- act -----------------------------------------------------------------------------------

    async def act(self) -> str:
        if not self.tool_calls:
            if _choice_value(self.tool_choices) == _REQUIRED:
                # Tell the model and let it try again, rather than ending the run.
                self.memory.add_message(Message.user_message(REQUIRED_TOOL_PROMPT))
                return "Error: a tool call was required but the model answered without one"
            answer = self._last_text
            if answer and self.text_answer_ends_run:
                self._final_answer = answer
                self.state = AgentState.FINISHED
                logger.info(f"🏁 {self.name} answered without tools; the run is complete")
            return answer or "No content or commands to execute"

        results = []
        cap = self._tool_call_cap()
        calls, not_run = self.tool_calls[:cap], self.tool_calls[cap:]
        if self.concurrent_tool_calls and len(calls) > 1:
            batches = plan_batches(calls, self.available_tools, self.special_tool_names)
        else:
            batches = [[command] for command in calls]
        for batch in batches:
            if len(batch) == 1:
                outcomes = [await self._run_tool_call(batch[0])]
            else:
                logger.info(f"⚡ Running {len(batch)} read-only tool calls at once")
                outcomes = await asyncio.gather(*(self._run_tool_call(c) for c in batch))
            # Results go into memory in the model's order, whatever order they finished in.
            for command, outcome in zip(batch, outcomes, strict=True):
                result, image = outcome.text, outcome.image
                if self.max_observe and isinstance(self.max_observe, int):
                    result = _truncate(result, self.max_observe)
                shown = bool(command.function.name.strip())
                if shown and not self._events.watched and log_enabled("INFO"):
                    logger.info(f"🎯 Tool '{command.function.name}' completed: {_preview(result)}")
                await self._record_result(command, result, outcome.failed, image)
                results.append(result)
        if not_run:
            results.append(await self._answer_not_run(not_run, cap))
        return "\n\n".join(results)

    async def _record_result(
        self, command: ToolCall, text: str, failed: bool, image: str | None = None
    ) -> None:
        """The call's result into memory (and to the listeners)."""
        name = command.function.name if command.function else ""
        self.memory.add_message(
            Message.tool_message(
                content=text,
                tool_call_id=command.id,
                name=name,
                base64_image=image,
                is_error=failed,
            )
        )
        if self._events.active and name.strip():  # a nameless call is not shown (think)
            await self._events.emit(
                ToolResultEvent(
                    self.name,
                    step=self.current_step,
                    call_id=command.id,
                    name=name,
                    output=text,
                    error=failed,
                    duration=self._tool_seconds.pop(command.id, None),
                    image=image,
                )
            )

    def _tool_call_cap(self) -> int:
        """Calls of one reply that run: ``max_tool_calls_per_reply``, else ``[limits]``."""
        if self.max_tool_calls_per_reply is not None:
            return self.max_tool_calls_per_reply
        if config.is_loaded:
            return config.app_config.limits.max_tool_calls_per_reply
        return int(LimitsSettings.model_fields["max_tool_calls_per_reply"].default)

    async def _answer_not_run(self, calls: list[ToolCall], cap: int) -> str:
        """Every call over the cap still gets its answer (the API requires one per call id),
        saying it was not run, so the model can ask again for what it still needs."""
        total = cap + len(calls)
        text = NOT_RUN_ERROR.format(total=total, cap=cap)
        logger.warning(
            f"{self.name}: the reply asked for {total} tool calls; the first {cap} ran, "
            f"{len(calls)} were answered 'not run' (max_tool_calls_per_reply)"
        )
        for command in calls:
            await self._record_result(command, text, True)
        return f"{len(calls)} tool call(s) not run: {text}"

    async def _run_tool_call(self, command: ToolCall) -> ToolOutcome:
        """One call, typed: its text, image and whether it failed. Concurrent calls run as
        separate tasks, each with its own context, so each sees only its own image."""
        _CURRENT_IMAGE.set(None)  # what the ``_current_base64_image`` property sets
        started = time.monotonic()
        outcome = await self.run_tool(command)
        if self._events.active:  # how long it ran, for traces
            self._tool_seconds[command.id] = time.monotonic() - started
        if outcome.image is None:
            image = _CURRENT_IMAGE.get()
            if image:
                outcome = replace(outcome, image=image)
        return outcome

    @property
    def _current_base64_image(self) -> str | None:
        """The image of the tool call running in this task (upstream's name; context-local)."""
        return _CURRENT_IMAGE.get()

    @_current_base64_image.setter
    def _current_base64_image(self, image: str | None) -> None:
        _CURRENT_IMAGE.set(image)

    async def execute_tool(self, command: ToolCall) -> str:
        """Run one tool call; every problem becomes an ``Error: ...`` text for the model
        (upstream's interface: :meth:`run_tool` keeps the outcome typed)."""
        return (await self.run_tool(command)).text

    async def run_tool(self, command: ToolCall) -> ToolOutcome:
        """Run one tool call; problems become failed outcomes with text for the model."""
        if not command or not command.function:
            return ToolOutcome("Error: Invalid command format", failed=True)
        name = command.function.name
        if name not in self.available_tools.tool_map:
            known = ", ".join(self.available_tools.tool_map) or "none"
            nameless = "" if name.strip() else " (the call names no tool)"
            return ToolOutcome(
                f"Error: Unknown tool '{name}'{nameless}. Available tools: {known}.", failed=True
            )
        try:
            args = parse_arguments(command.function.arguments)
        except ValueError as e:
            logger.warning(f"Bad arguments for '{name}': {_preview(command.function.arguments)}")
            if self._reply_cut:
                return ToolOutcome(CUT_ARGUMENTS_ERROR.format(name=name, problem=e), failed=True)
            return ToolOutcome(
                f"Error: Could not parse the arguments of tool '{name}': {e}. "
                "Send the arguments as one JSON object matching the tool's schema.",
                failed=True,
            )

        if log_enabled("DEBUG"):
            logger.debug(f"🔧 Activating tool: '{name}'...")
        step = self.current_step

        async def report(progress: float, total: float | None, message: str | None) -> None:
            if self._events.active:
                await self._events.emit(
                    ToolProgress(
                        self.name,
                        step=step,
                        call_id=command.id,
                        name=name,
                        progress=progress,
                        total=total,
                        message=redact_registered(message) if message else message,
                    )
                )

        context = ToolCallContext(command.id, name, report)
        with tool_call_context(context):
            try:
                result = await self.available_tools.execute(name=name, tool_input=args)
            except asyncio.CancelledError:
                await self._report_cancelled(command, "".join(context.partial_output))
                raise
        await self._handle_special_tool(name=name, result=result)
        answer_tools = [n.lower() for n in self.answer_tool_names]
        if name.lower() in answer_tools and not isinstance(result, ToolFailure):
            self._final_answer = _answer_text(result)
            self.state = AgentState.FINISHED
            logger.info(f"🏁 '{name}' gave the final answer; the run is complete")

        image = getattr(result, "base64_image", None) or None
        if image:
            self._current_base64_image = image
        failed = result_failed(result)
        text = redact_registered(format_output(result))  # no configured secret reaches the model
        if not text:
            return ToolOutcome(f"Cmd `{name}` completed with no output", image, failed)
        return ToolOutcome(f"Observed output of cmd `{name}` executed:\n{text}", image, failed)

    async def _report_cancelled(self, command: ToolCall, partial: str) -> None:
        """A call cut short (Stop, Ctrl-C) still tells the listeners it ended, with what it
        printed until then (shielded: the cancelled task may not await anything else)."""
        name = command.function.name
        if not self._events.active or not name.strip():
            return
        event = ToolResultEvent(
            self.name,
            step=self.current_step,
            call_id=command.id,
            name=name,
            output=redact_registered(partial),
            error=True,
            cancelled=True,
        )
        with contextlib.suppress(BaseException):
            await asyncio.shield(self._events.emit(event))

    async def _handle_special_tool(self, name: str, result: Any, **kwargs: Any) -> None:
        if not self._is_special_tool(name):
            return
        if isinstance(result, ToolFailure):
            return  # a terminate call with bad arguments does not end the run
        if self._should_finish_execution(name=name, result=result, **kwargs):
            logger.info(f"🏁 Special tool '{name}' has completed the task!")
            self.state = AgentState.FINISHED

    @staticmethod
    def _should_finish_execution(**kwargs: Any) -> bool:
        return True

    def _is_special_tool(self, name: str) -> bool:
        return name.lower() in [n.lower() for n in self.special_tool_names]

    # ---- run -----------------------------------------------------------------------------------

    def _begin_run(self) -> None:
        self._final_answer = None
        self._last_text = None
        self.tool_calls = []
        self._notes = []
        self._step_notes = []
        self._empty_replies = 0
        self._partial = []
        self._reply_cut = False

    @property
    def last_usage(self) -> Usage | None:
        """Usage of this agent's latest model turn (the prompt size of its last request)."""
        return self._last_usage

    def final_answer(self) -> str | None:
        """The text answer that ended the run; else the model's last words in this run."""
        return self._final_answer if self._final_answer is not None else self._last_text

    async def cleanup(self) -> None:
        """Let every tool release its resources; tools start again lazily if reused."""
        logger.debug(f"🧹 Cleaning up resources for agent '{self.name}'...")
        await self.available_tools.cleanup()

    async def run(self, request: str | None = None) -> Any:
        try:
            return await super().run(request)
        finally:
            await self.cleanup()


@lru_cache(maxsize=256)
def _prompt_message(role: ROLE_TYPE, text: str) -> Message:
    """One shared message per prompt text: built and wire-encoded once, not at every step.
    Prompt messages only go into requests, never into memory, so sharing them is safe."""
    return Message(role=role, content=text)


def _overflow(error: ContextWindowExceededError, why: str) -> ContextWindowExceededError:
    return ContextWindowExceededError(
        f"the request does not fit the model's context window, {why}: {error}",
        tokens=error.tokens,
        limit=error.limit,
        model=error.model,
        status_code=error.status_code,
    )


def _answer_text(result: Any) -> str:
    """The final answer an answer tool produced, as text."""
    if hasattr(result, "model_dump_json") and not isinstance(result, ToolResult):
        return result.model_dump_json()
    if isinstance(result, ToolResult):
        return result.output if isinstance(result.output, str) else format_output(result.output)
    return format_output(result)


def _choice_value(choice: Any) -> str:
    if type(choice) is str:
        return choice
    return choice.value if isinstance(choice, ToolChoice) else str(choice)


def _truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n... [truncated: {len(text) - limit} more characters]"


def _preview(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    text = text.replace("\n", " ")
    return text if len(text) <= _LOG_PREVIEW else text[:_LOG_PREVIEW] + "…"
