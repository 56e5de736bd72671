"""Context compaction: keep a long run inside the model's context window instead of failing.

Shrinks the conversation from ``trigger`` down to ``target``: long old tool outputs and tool-call
arguments become stubs, older turns are summarized by one LLM call (when that can reach the
target, or, when the request would not fit the window otherwise, what fits it), and old turns
are dropped or the newest turn's parts shortened as a last resort. A turn (a model answer and
its tool results) is kept or condensed whole. The full account is docs/sessions-and-events.md.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Protocol

from app.config import CompactionSettings
from app.events import Compacted
from app.exceptions import ContextWindowExceededError, LLMError, LLMResponseError
from app.llm.windows import known_window
from app.logger import logger
from app.prompt.compaction import SUMMARY_INTRO, SUMMARY_REQUEST, SUMMARY_SYSTEM, TRUNCATED_NOTE
from app.schema import Function, Message, ToolCall

if TYPE_CHECKING:
    from app.events import EventBus
    from app.llm import LLM
    from app.llm.usage import Usage
    from app.schema import Memory


class Compactable(Protocol):
    """What compaction needs of an agent (``ToolCallAgent`` has it), so that this module does
    not import the agent that uses it."""

    name: str
    llm: LLM
    memory: Memory
    current_step: int

    @property
    def system_prompt(self) -> str | None: ...
    @property
    def events(self) -> EventBus: ...
    @property
    def last_usage(self) -> Usage | None: ...

    def compaction_request(
        self, memory: list[Message]
    ) -> tuple[list[Message], list[Message] | None, list[dict[str, Any]]]: ...

    async def report_usage(self, usage: Usage | None) -> None: ...


_STUB_HEAD = 200
_CHARS_PER_TOKEN_BOUND = 2  # text has at least this many characters per token (a safe bound)
_REST_STEPS = 3  # steps compacting only what would not fit, after one that fell short
_FIT = 0.95  # the share of a context window a request may fill (the rest: the answer)
_MIN_SUMMARY_TOKENS = 64  # a summary shorter than this is not worth an LLM call
_SUMMARY_OVERHEAD = 40  # tokens of the summary message's framing


class Compactor:
    """Watches one agent's requests and compacts its memory when they grow too large."""

    def __init__(self, settings: CompactionSettings | None = None) -> None:
        self.settings = settings or CompactionSettings()
        self._window_key: tuple[Any, ...] | None = None
        self._window: int | None = None
        self._learned: int | None = None  # the window an overflow revealed (our token counts)
        self._checks = 0  # maybe_compact calls so far (steps, across runs)
        self._rest_until = 0  # a lighter check before this one (after one that fell short)
        self._seen = 0  # memory length at the last check
        self._scale = 1.0  # keeps one compaction's counts in one scale (see _summarize)

    def window(self, agent: Compactable) -> int | None:
        """The context window in input tokens: ``max_input_tokens``, else what the LLM knows
        (``context_window``), else a known window for the model; never more than an overflow
        showed it to be."""
        llm = agent.llm
        known = llm.context_window
        key = (id(llm), llm.model, llm.max_input_tokens, known, self._learned)
        if key != self._window_key:
            self._window_key = key
            window = llm.max_input_tokens or known or known_window(llm.model)
            if self._learned is not None:
                window = min(window, self._learned) if window else self._learned
            self._window = window
        return self._window

    async def maybe_compact(self, agent: Compactable) -> Compacted | None:
        """Compact ``agent``'s memory if its next request would pass the trigger."""
        if not self.settings.enabled:
            return None
        window = self.window(agent)
        self._checks += 1
        if window is None:
            return None
        trigger = int(window * self.settings.trigger)
        # After a compaction that fell short, only a request that would not fit the window
        # is compacted for a few steps (doing it at every step would spend a summary on each).
        bound = self._fit(agent, window) if self._checks < self._rest_until else trigger
        if (
            agent.llm.max_input_tokens is None
            and self._learned is None
            and self._clearly_below(agent, bound)
        ):
            return None
        before = await self._count(agent, agent.memory.messages)
        self._seen = len(agent.memory.messages)
        if before <= bound:
            return None
        return await self._compact(agent, before, window)

    async def compact_after_overflow(
        self, agent: Compactable, error: ContextWindowExceededError
    ) -> Compacted | None:
        """The endpoint refused a request as too long: learn the window from ``error`` and
        compact to it now. None when compaction is off or could not make the request smaller
        (then retrying is pointless)."""
        if not self.settings.enabled:
            return None
        counted = await self._count(agent, agent.memory.messages)
        limit = error.limit or self.window(agent)
        if error.tokens and limit and counted:
            # The endpoint counts differently from us: scale its window to our counts (up or
            # down), never below a prompt it accepted.
            scaled = agent.llm.server_counts.window_after(error, counted)
            window = scaled or int(limit * counted / error.tokens)
        elif limit and counted > limit:
            window = limit
        else:  # we count fewer tokens than the endpoint: the window is below our count
            window = int(counted * 0.9)
        window = max(window, 1)
        self._learned = min(window, self._learned) if self._learned else window
        return await self._compact(agent, counted, self.window(agent) or window)

    def _clearly_below(self, agent: Compactable, trigger: int) -> bool:
        """A cheap upper bound: the last request's prompt tokens plus the text added since
        (or, before any request, the text itself with room left for the tool schemas)."""
        messages = agent.memory.messages
        if self._seen > len(messages):  # memory was rewritten
            self._seen = 0
        last = agent.last_usage
        if last is None or self._seen == 0:
            base, start, limit = (
                len(agent.system_prompt or "") // _CHARS_PER_TOKEN_BOUND,
                0,
                trigger // 2,
            )
        else:
            base, start, limit = last.prompt_tokens, self._seen, trigger
        added = sum(
            len(m.content or "") + sum(len(c.function.arguments) for c in m.tool_calls or ())
            for m in messages[start:]
        )
        self._seen = len(messages)
        return base + added // _CHARS_PER_TOKEN_BOUND < limit

    async def _count(self, agent: Compactable, memory: list[Message]) -> int:
        messages, system, tools = agent.compaction_request(memory)
        return round(await agent.llm.count_request_tokens(messages, system, tools) * self._scale)

    async def _compact(self, agent: Compactable, before: int, window: int) -> Compacted | None:
        """Shrink the memory towards the target; when that is out of reach and the request
        would not fit the window, to what fits. None when nothing could be cut (the memory is
        then left as it was)."""
        try:
            return await self._shrink(agent, before, window)
        finally:
            self._scale = 1.0

    async def _shrink(self, agent: Compactable, before: int, window: int) -> Compacted | None:
        settings = self.settings
        target, fit = int(window * settings.target), self._fit(agent, window)
        stub = settings.stub_chars
        messages = list(agent.memory.messages)
        messages, stubbed = shorten_long_parts(
            messages, _recent_start(messages, settings.keep_recent_turns), stub
        )
        tokens = await self._recount(agent, messages, stubbed, before)
        summarized = 0
        for goal in (target, fit):
            if tokens <= goal:
                break
            plan = await self._plan_summary(agent, messages, goal)
            if plan is not None:
                messages, start, budget, count = plan
                stubbed += count
                messages, summarized = await self._summarize(agent, messages, start, window, budget)
                # The summary call's usage may have re-scaled our estimates to the server's
                # counts (learned from a prose prompt, not from tool schemas): the result is
                # judged in the scale this compaction started with.
                self._scale = before / max(await self._count(agent, agent.memory.messages), 1)
                tokens = await self._count(agent, messages)
            elif goal == target:  # no summary reaches it: shorten all but the newest turn
                messages, count = shorten_long_parts(messages, _recent_start(messages, 1), stub)
                stubbed += count
                tokens = await self._recount(agent, messages, count, tokens)
        # Still too big for the window: drop the older turns, then shorten the newest turn's
        # parts but its last output, then that too.
        if tokens > fit:
            messages, count = _drop_old_turns(messages, _recent_start(messages, 1))
            summarized += count
            tokens = await self._recount(agent, messages, count, tokens)
        for spared in (1, 0):
            if tokens > fit:
                messages, count = shorten_long_parts(messages, len(messages) - spared, stub)
                stubbed += count
                tokens = await self._recount(agent, messages, count, tokens)
        if tokens >= before:
            await self._report_nothing_cut(agent, messages, tokens, window)
            self._rest_until = self._checks + _REST_STEPS
            return None
        agent.memory.messages = messages
        self._seen = len(messages)
        if tokens > target:
            self._rest_until = self._checks + _REST_STEPS
            logger.warning(
                f"Compaction of '{agent.name}' could not reach its target ({tokens} > {target} "
                f"tokens of a {window}-token window; the system prompt, tools and newest turns "
                f"alone are too big); no new try for {_REST_STEPS} steps unless the request "
                "would not fit"
            )
        logger.info(
            f"Compacted the context of '{agent.name}': {before} → {tokens} tokens "
            f"(window {window}; {stubbed} tool outputs or arguments shortened, {summarized} "
            "messages summarized or dropped)"
        )
        event = Compacted(
            agent.name,
            step=agent.current_step,
            before_tokens=before,
            after_tokens=tokens,
            window=window,
            stubbed=stubbed,
            summarized=summarized,
        )
        if agent.events.active:
            await agent.events.emit(event)
        return event

    @staticmethod
    def _fit(agent: Compactable, window: int) -> int:
        """The most a request may take: all of ``max_input_tokens`` (a limit on input alone),
        else most of the window (a context window also holds the answer)."""
        return window if agent.llm.max_input_tokens else int(window * _FIT)

    async def _recount(
        self, agent: Compactable, messages: list[Message], changed: int, tokens: int
    ) -> int:
        return await self._count(agent, messages) if changed else tokens

    async def _report_nothing_cut(
        self, agent: Compactable, messages: list[Message], tokens: int, window: int
    ) -> None:
        """Say what is too big when compaction could not cut anything."""
        fixed = await self._count(agent, [])
        task = next((m for m in messages if m.role == "user"), None)
        with_task = await self._count(agent, [task]) if task is not None else fixed
        logger.warning(
            f"Compaction of '{agent.name}' could not cut anything: the request is {tokens} "
            f"tokens for a {window}-token window, of which the system prompt, tool schemas and "
            f"step prompt are {fixed}, the task {with_task - fixed} and the turns kept word for "
            f"word {max(tokens - with_task, 0)}"
        )

    async def _plan_summary(
        self, agent: Compactable, messages: list[Message], target: int
    ) -> tuple[list[Message], int, int, int] | None:
        """Where a summary should start and how long it may be so the request reaches
        ``target``: keeps as many recent turns as fit. None when no summary can reach it
        (the fixed part, the task and the newest turn alone are too big)."""
        task_index = next((i for i, m in enumerate(messages) if m.role == "user"), None)
        if task_index is None:
            return None
        head = [m for m in messages[:task_index] if m.role == "system"]
        for keep in range(self.settings.keep_recent_turns, 0, -1):
            start = _recent_start(messages, keep)
            if start <= task_index + 1:
                continue  # nothing between the task and the kept turns
            candidate, count = shorten_long_parts(messages, start, self.settings.stub_chars)
            rest = await self._count(agent, [*head, candidate[task_index], *candidate[start:]])
            budget = min(self.settings.summary_max_tokens, target - rest - _SUMMARY_OVERHEAD)
            if budget >= _MIN_SUMMARY_TOKENS:
                return candidate, start, budget, count
        return None

    async def _summarize(
        self,
        agent: Compactable,
        messages: list[Message],
        start: int,
        window: int,
        budget: int,
    ) -> tuple[list[Message], int]:
        """Replace the turns between the task and ``start`` by one summary message of at most
        ``budget`` tokens (one LLM call)."""
        head = [m for m in messages[:start] if m.role == "system"]
        task_index = next((i for i, m in enumerate(messages[:start]) if m.role == "user"), None)
        if task_index is None:
            return messages, 0
        task = messages[task_index]
        middle = [m for m in messages[task_index + 1 : start] if m.role != "system"]
        if not middle:
            return messages, 0
        budget_chars = max(window - budget - 400, 200) * _CHARS_PER_TOKEN_BOUND - len(
            task.content or ""
        )
        history = _render(middle, max(budget_chars, 400))
        prompt = SUMMARY_REQUEST.format(task=task.content or "", history=history)
        limit_key = "max_completion_tokens" if agent.llm.is_reasoning_model else "max_tokens"
        limit: dict[str, Any] = {limit_key: budget}  # goes through request()'s **kwargs
        try:
            reply = await agent.llm.request(
                [Message.user_message(prompt)],
                system_msgs=[Message.system_message(SUMMARY_SYSTEM)],
                **limit,
            )
            await agent.report_usage(reply.usage)
            summary = (reply.message.content or "").strip()
            if not summary:
                raise LLMResponseError("the summary came back empty", model=agent.llm.model)
            note = SUMMARY_INTRO + summary
        except LLMError as e:
            logger.warning(f"Could not summarize the older context ({e}); dropping it instead")
            note = TRUNCATED_NOTE.format(count=len(middle))
        return [*head, task, Message.user_message(note), *messages[start:]], len(middle)


def _recent_start(messages: list[Message], keep: int) -> int:
    """Index where the newest ``keep`` turns begin (a turn starts at a non-tool message)."""
    starts = [i for i, m in enumerate(messages) if m.role == "assistant"]
    if not starts:
        return len(messages)
    return starts[-keep] if len(starts) >= keep else starts[0]


def _drop_old_turns(messages: list[Message], start: int) -> tuple[list[Message], int]:
    """The turns between the task and ``start`` replaced by a note (no model call)."""
    task_index = next((i for i, m in enumerate(messages[:start]) if m.role == "user"), None)
    if task_index is None:
        return messages, 0
    middle = [m for m in messages[task_index + 1 : start] if m.role != "system"]
    if not middle:
        return messages, 0
    head = [m for m in messages[:start] if m.role == "system"]
    note = Message.user_message(TRUNCATED_NOTE.format(count=len(middle)))
    return [*head, messages[task_index], note, *messages[start:]], len(middle)


def shorten_long_parts(messages: list[Message], end: int, limit: int) -> tuple[list[Message], int]:
    """Long tool outputs and long tool-call arguments before ``end`` shortened to a stub that
    says what was cut (new message objects; call ids and names kept, arguments valid JSON)."""
    result = list(messages)
    count = 0
    for index in range(min(end, len(result))):
        message = result[index]
        if message.role == "assistant" and message.tool_calls:
            calls = [_shorten_call(call, limit) for call in message.tool_calls]
            cut = sum(new is not old for new, old in zip(calls, message.tool_calls, strict=True))
            if cut:
                result[index] = Message.from_tool_calls(
                    calls, content=message.content, base64_image=message.base64_image
                )
                count += cut
            continue
        content = message.content or ""
        if message.role != "tool" or len(content) <= limit:
            continue
        stub = (
            f"{content[:_STUB_HEAD]}\n… [output shortened to fit the context window: "
            f"{len(content) - _STUB_HEAD} more characters]"
        )
        result[index] = Message.tool_message(
            stub,
            name=message.name or "",
            tool_call_id=message.tool_call_id or "",
            is_error=message.is_error,
        )
        count += 1
    return result, count


def _shorten_call(call: ToolCall, limit: int) -> ToolCall:
    """``call`` with arguments over ``limit`` characters replaced by a JSON note saying how
    much was cut and how they began (the call itself if they are short)."""
    arguments = call.function.arguments
    if len(arguments) <= limit:
        return call
    note = (
        f"arguments shortened to fit the context window: {len(arguments) - _STUB_HEAD} of "
        f"{len(arguments)} characters cut; they began: {arguments[:_STUB_HEAD]}"
    )
    stub = json.dumps({"_shortened": note}, ensure_ascii=False)
    function = Function(name=call.function.name, arguments=stub)
    return ToolCall(id=call.id, type=call.type, function=function)


def _render(messages: list[Message], budget: int) -> str:
    """The messages as plain text for the summary request, the newest kept when too long."""
    lines = []
    for message in messages:
        text = message.content or ""
        if message.tool_calls:
            calls = "; ".join(  # a runaway argument must not crowd out the rest
                f"{c.function.name}({_clip(c.function.arguments)})" for c in message.tool_calls
            )
            text = f"{text}\n[calls: {calls}]" if text else f"[calls: {calls}]"
        who = f"tool {message.name}" if message.role == "tool" else message.role
        lines.append(f"## {who}\n{text}")
    rendered = "\n\n".join(lines)
    if len(rendered) > budget:
        rendered = "[…older part left out…]\n" + rendered[-budget:]
    return rendered


def _clip(text: str, limit: int = 2 * _STUB_HEAD) -> str:
    return text if len(text) <= limit else f"{text[:limit]}… [{len(text) - limit} more characters]"
