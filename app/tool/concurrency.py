"""Which of one assistant message's tool calls may run at the same time.

A model often asks for several independent reads at once (view three files, search twice).
Running those together saves their latencies; running a write, a command or ``terminate``
alongside anything else could change what the others see, so those stay in order. A tool
declares itself safe with ``concurrency_safe`` or, per call, with ``is_concurrency_safe``
(``str_replace_editor`` is safe to ``view``, not to ``create``).

Consecutive safe calls form one batch; every other call is a batch of its own. Running the
batches in order keeps the model's order wherever it can matter.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from app.logger import logger
from app.tool.arguments import parse_arguments

if TYPE_CHECKING:
    from app.schema import ToolCall
    from app.tool.tool_collection import ToolCollection

__all__ = ["call_is_concurrency_safe", "plan_batches"]


def call_is_concurrency_safe(
    call: ToolCall, tools: ToolCollection, barriers: Iterable[str] = ()
) -> bool:
    """True when ``call`` may run alongside other safe calls of the same message.

    Unknown tools, unreadable arguments and the ``barriers`` (special tools such as
    ``terminate``) are never concurrent; a tool whose safety check raises is treated as unsafe.
    """
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
    barrier_names = {name.lower() for name in barriers}
    batches: list[list[ToolCall]] = []
    open_batch: list[ToolCall] | None = None  # the current run of safe calls
    for call in calls:
        if call_is_concurrency_safe(call, tools, barrier_names):
            if open_batch is None:
                open_batch = []
                batches.append(open_batch)
            open_batch.append(call)
        else:
            open_batch = None
            batches.append([call])
    return batches
