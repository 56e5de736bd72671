"""Context windows: known ones by model name, the ones servers tell us when we overflow, and
how a server counts compared to us (:class:`ServerCounts`).

A server that rejects an oversized request usually names its window ("maximum context length
is 8192 tokens", llama.cpp's "Requested tokens (2100) exceed context window of 2048"); the
numbers are read here so the caller can shrink the conversation to fit and try again, unless
they contradict what was sent (:meth:`ServerCounts.contradiction`): then the server is at fault.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from app.llm.capabilities import base_model_name
from app.llm.endpoint_memory import MAX_RATIO, MIN_RATIO, CountFacts

if TYPE_CHECKING:
    from app.exceptions import ContextWindowExceededError
    from app.llm.endpoint_memory import EndpointMemories

#: Context windows (input tokens) of common models, by name prefix; longest prefix wins.
KNOWN_WINDOWS: dict[str, int] = {
    "gpt-4o": 128_000,
    "gpt-4.1": 1_000_000,
    "gpt-4-turbo": 128_000,
    "gpt-4": 8_192,
    "gpt-3.5-turbo": 16_385,
    "gpt-5": 272_000,
    "o1": 200_000,
    "o3": 200_000,
    "o4-mini": 200_000,
    "claude": 200_000,
    "gemini-1.5": 1_000_000,
    "gemini-2": 1_000_000,
    "deepseek": 64_000,
    "qwen": 32_768,
    "llama3": 8_192,
    "llama-3.1": 128_000,
    "llama3.1": 128_000,
    "llama3.2": 128_000,
    "llama3.3": 128_000,
    "llama3-1": 128_000,  # Bedrock's meta.llama3-1-70b-instruct-v1:0...
    "llama3-2": 128_000,
    "llama3-3": 128_000,
}

# Matched case-insensitively with ``re.search`` (compiled on first use, cached by ``re``).
_LIMIT_PATTERNS = (
    r"context (?:window|length|size)(?: of| is)?\s*(?:of\s*)?\(?(\d[\d,]*)",
    r"maximum context length (?:is|of)\s*(\d[\d,]*)",
    r"(\d[\d,]*)\s*(?:tokens?\s*)?maximum",
    r"n_ctx\D{0,5}(\d+)",
    r"max(?:imum)?[_ ]input[_ ]tokens\D{0,5}(\d+)",
)
# The prompt's own share first: OpenAI, vLLM and llama-cpp-python add max_tokens to "requested".
_TOKENS_PATTERNS = (
    r"\((\d[\d,]*) in (?:the messages|your prompt)",
    r"requested tokens\s*\((\d[\d,]*)\)",
    r"resulted in (\d[\d,]*) tokens",
    r"you requested (\d[\d,]*) tokens",
    r"prompt is too long:\s*(\d[\d,]*)",
    r"n_prompt_tokens\D{0,5}(\d+)",
    r"(\d[\d,]*) (?:input )?tokens? (?:exceed|is more than|>)",
)


def known_window(model: str) -> int | None:
    """The context window of ``model`` from :data:`KNOWN_WINDOWS`, if it is listed."""
    name = base_model_name(model)
    best = None
    for prefix, window in KNOWN_WINDOWS.items():
        if name.startswith(prefix) and (best is None or len(prefix) > best[0]):
            best = (len(prefix), window)
    return best[1] if best else None


def _first_number(patterns: tuple[str, ...], text: str) -> int | None:
    for pattern in patterns:
        match = re.search(pattern, text, re.IGNORECASE)
        if match:
            try:
                value = int(match.group(1).replace(",", ""))
            except ValueError:
                continue
            if value > 0:
                return value
    return None


_COMPLETION_PATTERN = r"(\d[\d,]*) (?:in|for) the completion"


def context_numbers(text: str, body: Any = None) -> tuple[int | None, int | None]:
    """``(window, prompt_tokens)`` named by an overflow error, each None when not stated. The
    window is the room for the prompt: when the prompt fits but not with the answer's
    ``max_tokens`` ("4000 in the messages, 512 in the completion" of 4096), it is 3584.

    llama.cpp's own error body carries them as fields (``n_ctx``, ``n_prompt_tokens``).
    """
    limit = tokens = None
    if isinstance(body, dict):
        error = body.get("error")
        inner = error if isinstance(error, dict) else body
        limit = _positive(inner.get("n_ctx"))
        tokens = _positive(inner.get("n_prompt_tokens"))
    limit = limit or _first_number(_LIMIT_PATTERNS, text)
    tokens = tokens or _first_number(_TOKENS_PATTERNS, text)
    if limit is not None and tokens is not None and tokens <= limit and tokens < 64:
        tokens = None  # a stray small number, not a request size
    completion = _first_number((_COMPLETION_PATTERN,), text)
    if limit and tokens and completion and tokens < limit < tokens + completion:
        limit -= completion
    return limit, tokens


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


#: Observations older than the newest weigh this much less each (the newest request counts most).
_DECAY = 0.5
#: Requests smaller than this (our tokens) teach nothing: the server's fixed framing dominates.
_MIN_OBSERVED = 32
#: A prior ratio from an earlier process weighs as much as a request of this many tokens.
_PRIOR_WEIGHT = 256
#: A server's prompt count above ours times this contradicts what was sent (calibrated counts,
#: else raw estimates, which may be off by up to 2x for a tokenizer unlike OpenAI's).
_CONTRADICTION = (1.3, 2.5)
#: A server's count of a request no bigger than one it answered, above ours times this, is
#: not believed either (calibrated counts are within a few percent of the server's).
_SAME_SIZE = 1.1
#: A request within this factor of a prompt the endpoint answered is no bigger than it.
_NO_BIGGER = 1.05
#: A request counted above its window times this cannot fit, however the server counts, and is
#: refused before it is sent: [calibrated, not]. An estimate not scaled to the server's counts
#: may be high by at most 1/MIN_RATIO = 5x (a server counting fewer than MIN_RATIO of our
#: tokens is not believed), and so may a window known only from the model's name (gpt-4's
#: 8,192 for gpt-4-32k): 5. Counts calibrated to the server (a learned ratio, or the model's own
#: tokenizer) against a window the profile names (max_input_tokens) are within a few percent of
#: the server's; ratios of requests with and without tools differ by up to a fifth, and the
#: decayed ratio lags a change of workload: twice the window leaves room for both.
HOPELESS = (2.0, 1 / MIN_RATIO)
#: Changes worth writing to the endpoint memory: the ratio by 5 %, the accepted size by 10 %.
_SAVE_RATIO, _SAVE_ACCEPTED = 0.05, 0.10


class ServerCounts:
    """How one endpoint and model counts prompts, learned from its answers: the ratio of its
    prompt tokens to our count of the same request (estimated counts are scaled by it), and
    the largest prompt it accepted (no window is learned below it). Kept in the endpoint
    memory across processes when ``memories`` is given."""

    def __init__(self, base_url: str, model: str, memories: EndpointMemories | None) -> None:
        self.key = (base_url, model)
        self._memories = memories
        # Decayed sums (theirs, ours) of observed requests, apart for requests with tools and
        # without: a summary's plain prose counts unlike tool schemas, and must not move the
        # ratio the agent's own requests are counted with.
        self._sums: dict[bool, tuple[float, float]] = {}
        self.accepted = 0
        self._saved: CountFacts | None = None  # what the memory holds; None: not read yet
        # The last answered request, counted by us only when a count is needed.
        self._pending: tuple[Sequence[Any], Any, int] | None = None

    def _load(self) -> None:
        if self._saved is not None:
            return
        facts = None
        if self._memories is not None:
            facts = self._memories.at().counts(*self.key)
        self._saved = facts or CountFacts()
        if self._saved.ratio is not None and not self._sums:
            prior = (self._saved.ratio * _PRIOR_WEIGHT, float(_PRIOR_WEIGHT))
            self._sums = {True: prior, False: prior}
        self.accepted = max(self.accepted, self._saved.accepted)

    @property
    def ratio(self) -> float | None:
        """The server's prompt tokens per token we count in requests with tools (the agent's;
        else in those without); None until learned."""
        return self.ratio_of(tools=True)

    def ratio_of(self, *, tools: bool) -> float | None:
        """The ratio for requests with or without tools, else the other kind's."""
        self._load()
        theirs, ours = self._sums.get(tools) or self._sums.get(not tools) or (0.0, 0.0)
        return theirs / ours if ours else None

    def scale(self, count: int, *, tools: bool = True) -> int:
        """``count`` (ours) in the server's tokens, as far as it is known."""
        ratio = self.ratio_of(tools=tools)
        return count if ratio is None else round(count * ratio)

    def observe(self, ours: int, theirs: int | None, *, tools: bool = True) -> None:
        """One request as we counted it and as the server did (implausible ratios ignored)."""
        if not theirs or ours < _MIN_OBSERVED or not MIN_RATIO <= theirs / ours <= MAX_RATIO:
            return
        self._load()
        old_theirs, old_ours = self._sums.get(tools, (0.0, 0.0))
        self._sums[tools] = (old_theirs * _DECAY + theirs, old_ours * _DECAY + ours)

    def answered(
        self, messages: Sequence[Any], tools: Any, prompt_tokens: int, *, owned: bool = False
    ) -> bool:
        """The server answered a request of ``prompt_tokens`` (its count): accepted, and kept
        to be counted by us when a count is next needed (most runs never need one); a list
        the caller ``owned`` (made for this request) is kept as it is, else copied. True when
        the accepted size grew (worth a :meth:`save`)."""
        self._load()
        grew = prompt_tokens > self.accepted
        if grew:
            self.accepted = prompt_tokens
        self._pending = (messages if owned else list(messages), tools, prompt_tokens)
        return grew

    async def settle(self, count: Callable[[Sequence[Any], Any], Awaitable[int]]) -> None:
        """Learn from the last answered request, counting it with ``count`` (ours, unscaled)."""
        pending, self._pending = self._pending, None
        if pending is not None:
            messages, tools, theirs = pending
            self.observe(await count(messages, tools), theirs, tools=bool(tools))
        await self.save()

    def contradiction(
        self, error: ContextWindowExceededError, sent: int, exact: bool, *, tools: bool = True
    ) -> str:
        """Why an overflow's numbers cannot be true of a request we estimated at ``sent``
        tokens; "" when they can, or when we count ``exact``-ly (with the model's own
        tokenizer the server's numbers are taken as they come). A prompt far above our
        estimate (llama-cpp-python names the prompt it grew itself while generating runaway
        tool arguments), above a calibrated estimate no bigger than a prompt the endpoint
        answered, or a window below such a prompt with no prompt size to back it, is the
        server's fault."""
        if exact:
            return ""
        self._load()
        if error.tokens:
            ours, calibrated = self.scale(sent, tools=tools), self.ratio is not None
            if ours and error.tokens > ours * _CONTRADICTION[not calibrated]:
                return f"it counts {error.tokens} prompt tokens in a request of about {ours}"
            no_bigger = ours <= self.accepted * _NO_BIGGER
            if calibrated and no_bigger and error.tokens > ours * _SAME_SIZE:
                return (
                    f"it counts {error.tokens} prompt tokens in a request of about {ours}, no "
                    f"bigger than the {self.accepted}-token prompt it answered before"
                )
        elif error.limit and error.limit < self.accepted:
            return (
                f"it names a {error.limit}-token window but accepted a {self.accepted}-token "
                "prompt before"
            )
        return ""

    def overflowed(
        self, error: ContextWindowExceededError, sent: int, exact: bool, *, tools: bool = True
    ) -> None:
        """Learn from a real overflow of a request we counted as ``sent``: how the server
        counts, and that a window below what it accepted before means it was reconfigured."""
        if not exact:
            self.observe(sent, error.tokens, tools=tools)
        if error.limit and error.limit < self.accepted:
            self.accepted = 0

    def window_after(self, error: ContextWindowExceededError, counted: int) -> int | None:
        """The window in our (scaled) counts after a real overflow: the server's, times how
        our count of the refused request compares to its count (up or down), never below a
        prompt it accepted; None when the error names no window."""
        if not error.limit:
            return None
        window = error.limit
        if error.tokens and counted:
            window = int(window * counted / error.tokens)
        return max(window, self.accepted, 1)

    def _unsaved(self) -> CountFacts | None:
        """What is worth writing to the memory now (a new ratio, a much larger prompt); only
        estimates are learned (an exact count needs no ratio)."""
        saved, ratio = self._saved or CountFacts(), self.ratio
        if ratio is None:
            return None
        new_ratio = saved.ratio is None or abs(ratio - saved.ratio) > _SAVE_RATIO * saved.ratio
        bigger = self.accepted > saved.accepted * (1 + _SAVE_ACCEPTED)
        if not (new_ratio or bigger or self.accepted < saved.accepted):
            return None
        return CountFacts(ratio if new_ratio else saved.ratio, self.accepted)

    async def save(self) -> None:
        """Write what changed to the endpoint memory (off the event loop: it locks and fsyncs)."""
        facts = self._unsaved()
        if facts is None:
            return
        self._saved = facts
        if self._memories is not None:
            memory = self._memories.at()
            await asyncio.to_thread(
                memory.remember_counts, *self.key, ratio=facts.ratio, accepted=facts.accepted
            )
