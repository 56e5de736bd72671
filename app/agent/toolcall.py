"""``ToolCallAgent``: the model picks tools by function calling; the agent runs them.

A subclass changes what a step does through ``think()`` (ask the model), ``act()`` (run the
calls it asked for), ``execute_tool()`` (one call) and the special-tool hooks; the rest lives
in collaborators: the reply bookkeeping (``app.agent.replies``), what is shown of a step
(``app.agent.reporting``), what the model reads of a call (``app.agent.outcome``) and context
compaction (``app.agent.compaction``).
"""

from __future__ import annotations

import asyncio
import copy
import time
import warnings
from contextvars import ContextVar
from functools import lru_cache
from typing import Any

from pydantic import Field, PrivateAttr

from app.agent.compaction import Compactor
from app.agent.outcome import ToolOutcome, observe, refused
from app.agent.react import ReActAgent
from app.agent.replies import ReplyBook
from app.agent.reporting import StepReporter, preview
from app.agent.result import RunResult, StopReason
from app.config import CompactionSettings, LimitsSettings, config
from app.exceptions import ContextWindowExceededError
from app.llm import Usage
from app.llm.arguments import parse_arguments
from app.llm.model import ModelResponse
from app.logger import log_enabled, logger
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
from app.tool.base import ToolResult, format_output, result_failed
from app.tool.concurrency import plan_batches
from app.tool.create_chat_completion import CreateChatCompletion
from app.tool.progress import ToolCallContext, tool_call_context
from app.tool.terminate import Terminate
from app.tool.tool_collection import ToolCollection

#: Upstream's message for "tool_choice is required but the model called none" (kept for
#: code that imports it; here such a reply gets REQUIRED_TOOL_PROMPT and another try).
TOOL_CALL_REQUIRED = "Tool calls required but none provided"

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

    #: The tools offered to the model. A collection given as a class default (upstream's
    #: style) is copied for each instance, so instances never share tools or their state.
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
    #: Context compaction (see ``app.agent.compaction``); None: the config's ``[compaction]``
    #: as it was when the agent was made.
    compaction: CompactionSettings | None = None
    #: Empty replies (no text, no tool call) in a row before the run fails.
    max_empty_replies: int = 3
    #: Times in a row an answer cut at ``max_tokens`` is continued before the run fails.
    max_continuations: int = 2
    #: Tool calls of one reply that run (the rest are answered "not run"); None: the
    #: config's ``[limits] max_tool_calls_per_reply`` as it was when the agent was made.
    max_tool_calls_per_reply: int | None = Field(default=None, ge=1)

    max_steps: int = 30
    max_observe: int | bool | None = None
    text_answer_ends_run: bool = True
    #: Run consecutive read-only calls of one message at the same time (see
    #: ``app.tool.concurrency``); False runs every call in order, one at a time.
    concurrent_tool_calls: bool = True

    _compactor: Compactor = PrivateAttr()
    _configured_cap: int = PrivateAttr()  # [limits] max_tool_calls_per_reply, when made
    _replies: ReplyBook = PrivateAttr()
    _show: StepReporter = PrivateAttr()
    _last_usage: Usage | None = PrivateAttr(default=None)
    _notes: list[str] = PrivateAttr()  # one-off notes for the next request
    _step_notes: list[str] = PrivateAttr()  # ... taken for this step
    _step_note: str | None = PrivateAttr(default=None)  # the step log line when think is False

    def model_post_init(self, context: Any, /) -> None:
        super().model_post_init(context)
        self._notes, self._step_notes = [], []
        self._replies = ReplyBook()
        self._show = StepReporter(self, self._events)
        compaction, self._configured_cap = _configured_settings()
        self._compactor = Compactor(self.compaction or compaction)
        self._own_class_default_tools()

    def _own_class_default_tools(self) -> None:
        """A collection written as a class default (``available_tools = ToolCollection(...)``)
        is one object for the whole class: give this instance its own copy of it."""
        declared = type(self).model_fields["available_tools"].default
        if self.available_tools is not declared:
            return
        try:
            tools = copy.deepcopy(declared)
        except Exception as e:
            raise TypeError(
                f"{type(self).__name__}.available_tools is a class default that cannot be "
                f"copied for each instance ({type(e).__name__}: {e}); declare it with "
                "Field(default_factory=lambda: ToolCollection(...)) instead"
            ) from e
        self.__dict__["available_tools"] = tools  # as given: not marked as set by the caller

    # ---- think ---------------------------------------------------------------------------------

    async def step(self) -> str:
        self._step_note = None
        if not await self.think():
            return self._step_note or "Thinking complete - no action needed"
        return await self.act()

    async def think(self) -> bool:
        """Ask the model for the next turn and take it in; False when there is nothing to act
        on (the step then ends, its log line saying why)."""
        choice = _choice_value(self.tool_choices)
        hint = self.take_stuck_hint()
        self._step_notes, self._notes = [*([hint] if hint else []), *self._notes], []
        await self.compactor.maybe_compact(self)
        reply, seconds = await self._request_turn(choice)
        self._last_usage = reply.usage
        await self.report_usage(
            reply.usage, model=self.llm.model, finish_reason=reply.finish_reason, duration=seconds
        )
        return await self._take_reply(reply, choice)

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
        """This agent's compactor: ``compaction``, else the config's ``[compaction]``."""
        compactor, wanted = self._compactor, self.compaction
        if wanted is not None and compactor.settings is not wanted:  # assigned since
            compactor = self._compactor = Compactor(wanted)
        return compactor

    @property
    def last_usage(self) -> Usage | None:
        """Usage of this agent's latest model turn (the prompt size of its last request)."""
        return self._last_usage

    async def _request_turn(self, choice: str) -> tuple[ModelResponse, float]:
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

    async def _ask(self, choice: str) -> tuple[ModelResponse, float]:
        """One request; the reply and the seconds it took."""
        extra: dict[str, Any] = {}
        on_delta = self._show.delta_sink()  # someone watches: the text as it is written
        if on_delta is not None:
            extra["on_delta"] = on_delta
        started = time.monotonic()
        reply = await self.llm.request(
            self._request_messages(),
            system_msgs=self._system_messages(),
            tools=self.available_tools.to_params(),
            tool_choice=choice,
            **extra,
        )
        return reply, time.monotonic() - started

    async def _take_reply(self, reply: ModelResponse, choice: str) -> bool:
        """One model turn into the run: shown, stored in memory, and whether there is
        something to act on (False: the step ends here, ``_step_note`` says why)."""
        await self._show.reasoning(reply.reasoning)  # shown as thinking; never stored
        turn = self._replies.read(reply, tools_enabled=choice != _NONE)
        if turn.ignored_calls:
            logger.warning(f"{self.name} asked for tools while tools are disabled; ignored")
        if turn.empty:
            return self._empty_reply(turn.count)
        if turn.cut:
            return await self._cut_answer(turn.content, turn.count)
        content, calls, shown = turn.content, turn.calls, turn.shown
        if len(shown) < len(calls):
            logger.warning(f"{self.name}: the model wrote a tool call that names no tool")
        self._show.log_reply(content, shown)
        self.tool_calls = calls
        # Thinking blocks go back to the model unchanged on the next turn (the API checks).
        thinking = reply.message.thinking_blocks
        if calls:
            self.memory.add_message(
                Message.from_tool_calls(calls, content=content, thinking_blocks=thinking)
            )
        elif content:
            self.memory.add_message(
                Message(role="assistant", content=content, thinking_blocks=thinking)
            )
        await self._show.reply(content, shown)
        if choice == _REQUIRED:
            return True  # act() handles a missing call
        return bool(calls or content)

    def _empty_reply(self, count: int) -> bool:
        """No text and no tool call: tell the model; fail after ``max_empty_replies``."""
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

    async def _cut_answer(self, content: str, cuts: int) -> bool:
        """A text answer cut at ``max_tokens`` is not the answer: keep the part, ask the
        model to go on; after ``max_continuations`` cut parts in a row the run fails."""
        self.tool_calls = []
        self.memory.add_message(Message.assistant_message(content))
        await self._show.reply(content, [])
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
        """Run the tool calls of the latest reply (read-only ones side by side) and store
        each result in the model's order; without calls, take the text as the answer."""
        if not self.tool_calls:
            return self._act_on_text()
        cap = self.max_tool_calls_per_reply or self._configured_cap
        calls, not_run = self.tool_calls[:cap], self.tool_calls[cap:]
        if self.concurrent_tool_calls and len(calls) > 1:
            batches = plan_batches(calls, self.available_tools, self.special_tool_names)
        else:
            batches = [[command] for command in calls]
        results = []
        for batch in batches:
            if len(batch) == 1:
                outcomes = [await self._run_call(batch[0])]
            else:
                logger.info(f"⚡ Running {len(batch)} read-only tool calls at once")
                outcomes = await asyncio.gather(*(self._run_call(c) for c in batch))
            # Results go into memory in the model's order, whatever order they finished in.
            for command, outcome in zip(batch, outcomes, strict=True):
                results.append(await self._record(command, outcome))
        if not_run:
            results.append(await self._answer_not_run(not_run, cap))
        return "\n\n".join(results)

    def _act_on_text(self) -> str:
        if _choice_value(self.tool_choices) == _REQUIRED:
            # Tell the model and let it try again, rather than ending the run.
            self.memory.add_message(Message.user_message(REQUIRED_TOOL_PROMPT))
            return "Error: a tool call was required but the model answered without one"
        answer = self._replies.last_text
        if answer and self.text_answer_ends_run:
            self._set_final_answer(answer)
            self.state = AgentState.FINISHED
            logger.info(f"🏁 {self.name} answered without tools; the run is complete")
        return answer or "No content or commands to execute"

    async def _run_call(self, command: ToolCall) -> ToolOutcome:
        """``execute_tool`` in its own context (concurrent calls are separate tasks, so each
        sees only its own image), timed."""
        _CURRENT_IMAGE.set(None)  # what the ``_current_base64_image`` property sets
        started = time.monotonic()
        outcome = await self.execute_tool(command)
        if not isinstance(outcome, ToolOutcome):  # an override returning upstream's str
            outcome = ToolOutcome(str(outcome))
        outcome.seconds = time.monotonic() - started
        if outcome.image is None:
            outcome.image = _CURRENT_IMAGE.get()
        return outcome

    async def _record(self, command: ToolCall, outcome: ToolOutcome) -> str:
        """The call's result into memory (cut to ``max_observe``) and to the listeners."""
        text = outcome.text
        if self.max_observe and isinstance(self.max_observe, int):
            text = _truncate(text, self.max_observe)
        self.memory.add_message(
            Message.tool_message(
                content=text,
                tool_call_id=command.id,
                name=command.function.name if command.function else "",
                base64_image=outcome.image,
                is_error=outcome.failed,
            )
        )
        await self._show.result(
            command, text, failed=outcome.failed, image=outcome.image, seconds=outcome.seconds
        )
        return text

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
            self.memory.add_message(
                Message.tool_message(
                    content=text, tool_call_id=command.id, name=command.function.name, is_error=True
                )
            )
            await self._show.result(command, text, failed=True, log=False)
        return f"{len(calls)} tool call(s) not run: {text}"

    async def execute_tool(self, command: ToolCall) -> ToolOutcome:
        """Run one tool call. The outcome is the text the model reads (a ``str``, as
        upstream's), flagged ``failed`` and carrying the call's image; every problem is a
        failed outcome the model can act on, never an exception. Override to change how one
        call runs; the special-tool and answer-tool rules apply here."""
        if not command or not command.function:
            return refused("Invalid command format")
        name = command.function.name
        tools = self.available_tools
        if name not in tools.tool_map:
            return observe(name, tools.unknown_tool(name), failed=True)
        try:
            args = parse_arguments(command.function.arguments)
        except ValueError as e:
            logger.warning(f"Bad arguments for '{name}': {preview(command.function.arguments)}")
            if self._replies.reply_cut:
                return ToolOutcome(CUT_ARGUMENTS_ERROR.format(name=name, problem=e), failed=True)
            return refused(
                f"Could not parse the arguments of tool '{name}': {e}. "
                "Send the arguments as one JSON object matching the tool's schema."
            )
        if log_enabled("DEBUG"):
            logger.debug(f"🔧 Activating tool: '{name}'...")
        context = ToolCallContext(command.id, name, self._show.progress(command))
        with tool_call_context(context):
            try:
                result = await tools.execute(name=name, tool_input=args)
            except asyncio.CancelledError:
                await self._show.cancelled(command, "".join(context.partial_output))
                raise
        failed = result_failed(result)
        await self._handle_special_tool(name=name, result=result)
        if not failed and name.lower() in (n.lower() for n in self.answer_tool_names):
            self._set_final_answer(_answer_text(result))
            self.state = AgentState.FINISHED
            logger.info(f"🏁 '{name}' gave the final answer; the run is complete")
        outcome = observe(name, result, failed)
        if outcome.image:
            self._current_base64_image = outcome.image
        return outcome

    async def run_tool(self, command: ToolCall) -> ToolOutcome:
        """Deprecated: :meth:`execute_tool`, the one name for running one call."""
        warnings.warn(
            "ToolCallAgent.run_tool() is deprecated; use execute_tool()",
            DeprecationWarning,
            stacklevel=2,
        )
        return await self.execute_tool(command)

    @property
    def _current_base64_image(self) -> str | None:
        """The image of the tool call running in this task (upstream's name; context-local)."""
        return _CURRENT_IMAGE.get()

    @_current_base64_image.setter
    def _current_base64_image(self, image: str | None) -> None:
        _CURRENT_IMAGE.set(image)

    # ---- hooks (upstream's names) --------------------------------------------------------------

    async def _handle_special_tool(self, name: str, result: Any, **kwargs: Any) -> None:
        """A successful call of a special tool (``terminate``) ends the run; a failed one
        (bad arguments) does not."""
        if not self._is_special_tool(name) or result_failed(result):
            return
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
        self._replies.begin_run()
        self.tool_calls = []
        self._notes = []
        self._step_notes = []

    def _set_final_answer(self, answer: str) -> None:
        """The answer this run ends with (``final_answer()``, ``RunResult.final_answer``)."""
        self._replies.final_answer = answer

    def final_answer(self) -> str | None:
        """The text answer that ended the run; else the model's last words in this run."""
        return self._replies.answer()

    async def cleanup(self) -> None:
        """Let every tool release its resources; tools start again lazily if reused."""
        logger.debug(f"🧹 Cleaning up resources for agent '{self.name}'...")
        await self.available_tools.cleanup()

    async def run(self, request: str | None = None) -> RunResult:
        """``BaseAgent.run``, then ``cleanup()`` (the tools release what they hold)."""
        try:
            return await super().run(request)
        finally:
            await self.cleanup()


def _configured_settings() -> tuple[CompactionSettings | None, int]:
    """The config's ``[compaction]`` and ``[limits] max_tool_calls_per_reply`` (defaults when
    no config is loaded): read once, when an agent is made, never while it runs."""
    if config.is_loaded:
        settings = config.app_config
        return settings.compaction, settings.limits.max_tool_calls_per_reply
    return None, int(LimitsSettings.model_fields["max_tool_calls_per_reply"].default)


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


def _answer_text(result: ToolResult) -> str:
    """The final answer an answer tool produced, as text (a pydantic answer as JSON)."""
    output = result.output
    if hasattr(output, "model_dump_json"):
        return str(output.model_dump_json())
    return output if isinstance(output, str) else format_output(output)


def _choice_value(choice: Any) -> str:
    if type(choice) is str:
        return choice
    return choice.value if isinstance(choice, ToolChoice) else str(choice)


def _truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n... [truncated: {len(text) - limit} more characters]"
