"""Context compaction: keep a long run inside the model's context window instead of failing.

Shrinks the conversation from ``trigger`` down to ``target``: long old tool outputs become
stubs, older turns are summarized by one LLM call (only when that can reach the target), and
fewer newest turns are kept when they alone are too big. A turn (a model answer and its tool
results) is kept or condensed whole. The full account is docs/sessions-and-events.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from app.config import CompactionSettings
from app.events import Compacted
from app.exceptions import ContextWindowExceededError, LLMError, LLMResponseError
from app.llm.windows import known_window
from app.logger import logger
from app.prompt.compaction import SUMMARY_INTRO, SUMMARY_REQUEST, SUMMARY_SYSTEM, TRUNCATED_NOTE
from app.schema import Message

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
_REST_STEPS = 3  # steps without compaction after one that could not reach its target
_MIN_SUMMARY_TOKENS = 64  # a summary shorter than this is not worth an LLM call
_SUMMARY_OVERHEAD = 40  # tokens of the summary message's framing


class Compactor:
    """Watches one agent's requests and compacts its memory when they grow too large."""

    def __init__(self, settings: CompactionSettings | None = None) -> None:
        self.settings = settings or CompactionSettings()
        self._window_key: tuple[Any, ...] | None = None
        self._window: int | None = None
        self._learned: int | None = None  # the window an overflow revealed (our token counts)
        self._rest_until = 0  # no compaction before this step (after one that fell short)
        self._seen = 0  # memory length at the last check

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
        if window is None or agent.current_step < self._rest_until:
            return None
        trigger = int(window * self.settings.trigger)
        if (
            agent.llm.max_input_tokens is None
            and self._learned is None
            and self._clearly_below(agent, trigger)
        ):
            return None
        before = await self._count(agent, agent.memory.messages)
        self._seen = len(agent.memory.messages)
        if before <= trigger:
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
            # The endpoint counts differently from us: scale its window to our counts.
            window = int(limit * min(1.0, counted / error.tokens))
        elif limit and counted > limit:
            window = limit
        else:  # we count fewer tokens than the endpoint: the window is below our count
            window = int(counted * 0.9)
        window = max(window, 1)
        self._learned = min(window, self._learned) if self._learned else window
        event = await self._compact(agent, counted, self.window(agent) or window)
        return event if event.after_tokens < event.before_tokens else None

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
        return await agent.llm.count_request_tokens(messages, system, tools)

    async def _compact(self, agent: Compactable, before: int, window: int) -> Compacted:
        settings = self.settings
        target = int(window * settings.target)
        messages = list(agent.memory.messages)
        messages, stubbed = shorten_tool_outputs(
            messages, _recent_start(messages, settings.keep_recent_turns), settings.stub_chars
        )
        tokens = await self._count(agent, messages) if stubbed else before
        summarized = 0
        if tokens > target:
            plan = await self._plan_summary(agent, messages, target)
            if plan is not None:
                messages, start, budget, count = plan
                stubbed += count
                messages, summarized = await self._summarize(agent, messages, start, window, budget)
                tokens = await self._count(agent, messages)
        # No summary could help: shorten everything before the newest turn; if the newest turn
        # alone passes the window, all but its last output, then that too.
        last, newest = len(messages), _recent_start(messages, 1)
        for bound, end in ((target, newest), (window, last - 1), (window, last)):
            if tokens <= bound:
                continue
            messages, count = shorten_tool_outputs(messages, end, settings.stub_chars)
            stubbed += count
            if count:
                tokens = await self._count(agent, messages)
        agent.memory.messages = messages
        self._seen = len(messages)
        if tokens > target:
            self._rest_until = agent.current_step + _REST_STEPS
            logger.warning(
                f"Compaction of '{agent.name}' could not reach its target ({tokens} > {target} "
                f"tokens of a {window}-token window; the system prompt, tools and newest turn "
                f"alone are too big); next try at step {self._rest_until} at the earliest"
            )
        logger.info(
            f"Compacted the context of '{agent.name}': {before} → {tokens} tokens "
            f"(window {window}; {stubbed} outputs shortened, {summarized} messages "
            "summarized)"
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
            candidate, count = shorten_tool_outputs(messages, start, self.settings.stub_chars)
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


def shorten_tool_outputs(
    messages: list[Message], end: int, limit: int
) -> tuple[list[Message], int]:
    """Long tool outputs before ``end`` shortened to a stub (new message objects)."""
    result = list(messages)
    count = 0
    for index in range(min(end, len(result))):
        message = result[index]
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


def _render(messages: list[Message], budget: int) -> str:
    """The messages as plain text for the summary request, the newest kept when too long."""
    lines = []
    for message in messages:
        text = message.content or ""
        if message.tool_calls:
            calls = "; ".join(
                f"{c.function.name}({c.function.arguments})" for c in message.tool_calls
            )
            text = f"{text}\n[calls: {calls}]" if text else f"[calls: {calls}]"
        who = f"tool {message.name}" if message.role == "tool" else message.role
        lines.append(f"## {who}\n{text}")
    rendered = "\n\n".join(lines)
    if len(rendered) > budget:
        rendered = "[…older part left out…]\n" + rendered[-budget:]
    return rendered
