"""Which of one assistant message's tool calls may run at the same time (docs/agents.md,
"Concurrent tool calls"): consecutive safe calls form one batch, every other call is a batch
of its own, and the batches run in order.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import TYPE_CHECKING

from app.llm.arguments import parse_arguments
from app.logger import logger

if TYPE_CHECKING:
    from app.schema import ToolCall
    from app.tool.tool_collection import ToolCollection


def call_is_concurrency_safe(
    call: ToolCall, tools: ToolCollection, barriers: Iterable[str] = ()
) -> bool:
    """True when ``call`` may run alongside other safe calls of the same message; unknown
    tools, unreadable arguments, ``barriers`` and a raising safety check say no."""
    function = call.function
    name = function.name if function is not None else ""
    if not name or name.lower() in barriers:
        return False
    tool = tools.get_tool(name)
    if tool is None:
        return False
    try:
        return bool(tool.is_concurrency_safe(parse_arguments(function.arguments)))
    except ValueError:
        return False  # malformed arguments: the call will only report an error, in order
    except Exception as e:
        logger.warning(f"Concurrency check of tool '{name}' raised {type(e).__name__}: {e}")
        return False


def plan_batches(
    calls: list[ToolCall], tools: ToolCollection, barriers: Iterable[str] = ()
) -> list[list[ToolCall]]:
    """Split ``calls`` into batches to run one after another, keeping the model's order."""
    names = {name.lower() for name in barriers}
    batches: list[list[ToolCall]] = []
    for safe, run in itertools.groupby(calls, lambda c: call_is_concurrency_safe(c, tools, names)):
        group = list(run)  # consecutive safe calls run together, any other call alone
        batches.extend([group] if safe else [[call] for call in group])
    return batches
