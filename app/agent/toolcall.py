"""``ToolCallAgent``: the model picks tools by function calling; the agent runs them."""

from __future__ import annotations

import asyncio
import json
from contextvars import ContextVar
from dataclasses import replace
from functools import lru_cache
from typing import Any

from pydantic import Field, PrivateAttr

from app.agent.compaction import Compactor
from app.agent.react import ReActAgent
from app.config_models import CompactionSettings
from app.events import TextDelta, Thought, ToolCallEvent, ToolResultEvent
from app.llm import Usage
from app.logger import log_enabled, logger, redact_registered
from app.prompt.toolcall import NEXT_STEP_PROMPT, REQUIRED_TOOL_PROMPT, SYSTEM_PROMPT
from app.schema import TOOL_CHOICE_TYPE, AgentState, Message, ToolCall, ToolChoice
from app.tool.arguments import parse_arguments
from app.tool.base import ToolFailure, ToolOutcome, ToolResult, format_output
from app.tool.concurrency import plan_batches
from app.tool.create_chat_completion import CreateChatCompletion
from app.tool.terminate import Terminate
from app.tool.tool_collection import ToolCollection

__all__ = ["ToolCallAgent"]

_LOG_PREVIEW = 300
_CURRENT_IMAGE: ContextVar[str | None] = ContextVar("tool_call_image", default=None)


class ToolCallAgent(ReActAgent):
    """Each step asks the model for tool calls, runs them and records the results in order.

    Consecutive calls of read-only tools run at the same time (``concurrent_tool_calls``);
    everything else runs one at a time, in the model's order.

    A plain text answer (no tool call) ends the run with that text as the final answer,
    unless ``text_answer_ends_run`` is False (then the loop goes on, as upstream did).
    """

    name: str = "toolcall"
    description: str = "an agent that can execute tool calls."

    system_prompt: str = SYSTEM_PROMPT
    next_step_prompt: str = NEXT_STEP_PROMPT

    available_tools: ToolCollection = Field(
        default_factory=lambda: ToolCollection(CreateChatCompletion(), Terminate())
    )
    tool_choices: TOOL_CHOICE_TYPE = ToolChoice.AUTO.value  # type: ignore[assignment]
    special_tool_names: list[str] = Field(default_factory=lambda: [Terminate().name])

    tool_calls: list[ToolCall] = Field(default_factory=list)
    #: Context compaction (see ``app.agent.compaction``); None: the config's ``[compaction]``.
    compaction: CompactionSettings | None = None
    _compactor: Compactor | None = PrivateAttr(default=None)
    _final_answer: str | None = PrivateAttr(default=None)
    _last_text: str | None = PrivateAttr(default=None)
    _last_usage: Usage | None = PrivateAttr(default=None)

    max_steps: int = 30
    max_observe: int | bool | None = None
    text_answer_ends_run: bool = True
    #: Run consecutive read-only calls of one message at the same time (see
    #: ``app.tool.concurrency``); False runs every call in order, one at a time.
    concurrent_tool_calls: bool = True

    # ---- think ---------------------------------------------------------------------------------

    def _request_messages(self) -> list[Message]:
        """Memory plus this step's prompt. The next-step prompt is sent with every request
        but not stored, so it never piles up in the history."""
        prompts = [p for p in (self.take_stuck_hint(), self.next_step_prompt) if p]
        if not prompts:
            return list(self.messages)
        return [*self.messages, _prompt_message("user", "\n\n".join(prompts))]

    def _compaction_request(
        self, memory: list[Message]
    ) -> tuple[list[Message], list[Message] | None, list[dict[str, Any]]]:
        """What a request over ``memory`` would hold: messages, system prompt and tools."""
        prompts = [p for p in (self._stuck_hint, self.next_step_prompt) if p]
        messages = [*memory, _prompt_message("user", "\n\n".join(prompts))] if prompts \
            else list(memory)
        system = [_prompt_message("system", self.system_prompt)] if self.system_prompt else None
        return messages, system, self.available_tools.to_params()

    async def _compact_if_needed(self) -> None:
        compactor = self._compactor
        if compactor is None:
            settings = self.compaction
            if settings is None:
                from app.config import config

                settings = config.app_config.compaction if config.is_loaded else None
            compactor = self._compactor = Compactor(settings)
        await compactor.maybe_compact(self)

    async def think(self) -> bool:
        choice = _choice_value(self.tool_choices)
        await self._compact_if_needed()
        bus = self._events
        extra: dict[str, Any] = {}
        if bus.active:  # someone watches: stream the text to them as it is written
            name, step = self.name, self.current_step

            async def on_delta(text: str) -> None:
                await bus.emit(TextDelta(name, step=step, text=text))

            extra["on_delta"] = on_delta
        reply = await self.llm.request(
            self._request_messages(),
            system_msgs=[_prompt_message("system", self.system_prompt)]
            if self.system_prompt
            else None,
            tools=self.available_tools.to_params(),
            tool_choice=choice,
            **extra,
        )
        self._last_usage = reply.usage
        await self._report_usage(reply.usage)
        response = reply.message

        tool_calls = list(response.tool_calls or [])
        content = response.content or ""
        if content.strip():
            self._last_text = content
        watched = bus.active  # listeners show progress; the log then stays quiet
        if content and not watched and log_enabled("INFO"):
            logger.info(f"✨ {self.name}'s thoughts: {content}")
        if tool_calls and not watched and log_enabled("INFO"):
            names = ", ".join(call.function.name for call in tool_calls)
            logger.info(f"🛠️ {self.name} selected {len(tool_calls)} tool(s): {names}")
            for call in tool_calls:
                logger.info(f"🔧 {call.function.name} arguments: "
                            f"{_preview(call.function.arguments)}")

        if choice == ToolChoice.NONE.value:
            if tool_calls:
                logger.warning(f"{self.name} asked for tools while tools are disabled; ignored")
            self.tool_calls = []
            if content:
                self.memory.add_message(Message.assistant_message(content))
                if bus.active:
                    await bus.emit(Thought(self.name, step=self.current_step, text=content))
            return bool(content)

        self.tool_calls = tool_calls
        if tool_calls:
            self.memory.add_message(Message.from_tool_calls(tool_calls, content=content))
        elif content:
            self.memory.add_message(Message.assistant_message(content))
        if bus.active:
            if content:
                await bus.emit(Thought(self.name, step=self.current_step, text=content))
            for call in tool_calls:
                await bus.emit(ToolCallEvent(self.name, step=self.current_step, call_id=call.id,
                                             name=call.function.name,
                                             arguments=call.function.arguments))

        if choice == ToolChoice.REQUIRED.value:
            return True  # act() handles a missing call
        return bool(tool_calls or content)

    # ---- act -----------------------------------------------------------------------------------

    async def act(self) -> str:
        if not self.tool_calls:
            if _choice_value(self.tool_choices) == ToolChoice.REQUIRED.value:
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
        if self.concurrent_tool_calls and len(self.tool_calls) > 1:
            batches = plan_batches(self.tool_calls, self.available_tools, self.special_tool_names)
        else:
            batches = [[command] for command in self.tool_calls]
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
                if not self._events.active and log_enabled("INFO"):
                    logger.info(f"🎯 Tool '{command.function.name}' completed: "
                                f"{_preview(result)}")
                self.memory.add_message(
                    Message.tool_message(
                        content=result,
                        tool_call_id=command.id,
                        name=command.function.name,
                        base64_image=image,
                    )
                )
                results.append(result)
                if self._events.active:
                    await self._events.emit(ToolResultEvent(
                        self.name, step=self.current_step, call_id=command.id,
                        name=command.function.name, output=result,
                        error=outcome.failed))
        return "\n\n".join(results)

    async def _run_tool_call(self, command: ToolCall) -> ToolOutcome:
        """One call, typed: its text, image and whether it failed. Concurrent calls run as
        separate tasks, each with its own context, so each sees only its own image."""
        self._current_base64_image = None
        outcome = await self.run_tool(command)
        if outcome.image is None and self._current_base64_image:
            outcome = replace(outcome, image=self._current_base64_image)
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
        if not command or not command.function or not command.function.name:
            return ToolOutcome("Error: Invalid command format", failed=True)
        name = command.function.name
        if name not in self.available_tools.tool_map:
            known = ", ".join(self.available_tools.tool_map) or "none"
            return ToolOutcome(f"Error: Unknown tool '{name}'. Available tools: {known}.",
                               failed=True)
        try:
            args = parse_arguments(command.function.arguments)
        except ValueError as e:
            logger.warning(f"Bad arguments for '{name}': {command.function.arguments!r}")
            return ToolOutcome(
                f"Error: Could not parse the arguments of tool '{name}': {e}. "
                "Send the arguments as one JSON object matching the tool's schema.",
                failed=True,
            )

        if log_enabled("DEBUG"):
            logger.debug(f"🔧 Activating tool: '{name}'...")
        result = await self.available_tools.execute(name=name, tool_input=args)
        await self._handle_special_tool(name=name, result=result)

        image = getattr(result, "base64_image", None) or None
        if image:
            self._current_base64_image = image
        failed = isinstance(result, ToolResult) and result.failed
        text = redact_registered(format_output(result))  # no configured secret reaches the model
        if not text:
            return ToolOutcome(f"Cmd `{name}` completed with no output", image, failed)
        return ToolOutcome(f"Observed output of cmd `{name}` executed:\n{text}", image, failed)

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
def _prompt_message(role: str, text: str) -> Message:
    """One shared message per prompt text: built and wire-encoded once, not at every step.
    Prompt messages only go into requests, never into memory, so sharing them is safe."""
    return Message(role=role, content=text)


def _choice_value(choice: Any) -> str:
    return choice.value if isinstance(choice, ToolChoice) else str(choice)


def _truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n... [truncated: {len(text) - limit} more characters]"


def _preview(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    text = text.replace("\n", " ")
    return text if len(text) <= _LOG_PREVIEW else text[:_LOG_PREVIEW] + "…"

