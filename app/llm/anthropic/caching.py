"""Prompt-cache breakpoints: where a request marks its stable prefix for the provider to keep.

The API caches the prefix of a request (tools, then system, then messages) up to each block
marked ``cache_control``, when it is long enough, and a later request that starts with the very
same bytes up to a marked block reads it at a tenth of the input price. An agent re-sends its
whole history at every step, so the marks go where the next request will repeat this one:

1. the last tool definition (the tools);
2. the last system block (tools and system prompt);
3. the end of the newest user turn's history: its last ``tool_result`` when it has some (an
   agent adds its next-step prompt after the results on every request, and that prompt is
   not kept in the history), else its last block. The next request repeats everything up to
   here, so it reads this;
4. the same point of the user turn before, which the previous request marked as its 3: read
   now.

Never more than four, the API's limit.
"""

from __future__ import annotations

from typing import Any

#: The API refuses a request with more marked blocks than this.
MAX_BREAKPOINTS = 4


def mark_breakpoints(
    tools: list[dict[str, Any]],
    system: list[dict[str, Any]],
    messages: list[dict[str, Any]],
    *,
    ttl: str | None = None,
) -> int:
    """Mark the blocks above with ``cache_control`` (in place); returns how many were marked."""
    marks: list[dict[str, Any]] = []
    if tools:
        marks.append(tools[-1])
    if system:
        marks.append(system[-1])
    user_turns = [turn for turn in messages if turn["role"] == "user" and turn["content"]]
    for turn in user_turns[-1:-3:-1]:
        marks.append(_stable_end(turn["content"]))
    control: dict[str, Any] = {"type": "ephemeral"}
    if ttl:
        control["ttl"] = ttl
    marked = 0
    seen: set[int] = set()
    for block in marks[:MAX_BREAKPOINTS]:
        if id(block) not in seen:
            seen.add(id(block))
            block["cache_control"] = dict(control)
            marked += 1
    return marked


def _stable_end(blocks: list[dict[str, Any]]) -> dict[str, Any]:
    results = [block for block in blocks if block.get("type") == "tool_result"]
    return results[-1] if results else blocks[-1]
