"""The A2A server's task store: each caller's tasks, in memory, within bounds
(docs/a2a.md#limits).

The SDK's in-memory store keeps every task and its artifacts for ever. This one keeps at most
``max_tasks`` tasks and ``max_bytes`` of them, and forgets a finished task ``max_age`` seconds
after its last update: the finished tasks updated longest ago go first. A task still under
way (submitted, working, waiting for an answer) is never dropped. A dropped task is unknown
afterwards, as after a restart (its conversation and session file stay). Listings come in
pages bounded by count and by size.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from a2a.server.context import ServerCallContext
from a2a.server.tasks import TaskStore
from a2a.types import ListTasksRequest, ListTasksResponse, Task, TaskState
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE
from a2a.utils.errors import InvalidParamsError
from a2a.utils.task import ListTasksCursor, decode_list_tasks_cursor, encode_list_tasks_cursor

#: States after which a task changes no more: only these are ever dropped.
FINISHED = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    }
)

#: Called with (owner, task id) for each dropped task (its push configs go with it).
OnDrop = Callable[[str, str], Awaitable[None]]


@dataclass(frozen=True)
class StoreLimits:
    """The bounds (``--max-tasks``, ``--task-memory``, ``--task-ttl``) and the largest page
    a listing returns, in bytes (at least one task per page)."""

    max_tasks: int = 1000
    max_bytes: int = 256 << 20
    max_age: float = 24 * 3600.0
    page_bytes: int = 8 << 20


@dataclass
class _Entry:
    task: Task
    size: int  # the whole task, serialized
    artifact_size: int
    updated: float

    @property
    def finished(self) -> bool:
        return self.task.status.state in FINISHED


def _sort_key(task: Task) -> tuple[bool, int, str]:
    """The SDK's listing order (newest status first; then by id), descending."""
    stamped = task.status.HasField("timestamp")
    return (stamped, task.status.timestamp.ToNanoseconds() if stamped else 0, task.id)


def _copy(task: Task) -> Task:
    copied = Task()
    copied.CopyFrom(task)
    return copied


class BoundedTaskStore(TaskStore):
    """Tasks by (owner, id), oldest update first; see the module's docstring."""

    def __init__(
        self,
        limits: StoreLimits | None = None,
        *,
        on_drop: OnDrop | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limits = limits or StoreLimits()
        self.on_drop = on_drop
        self.clock = clock
        self._entries: OrderedDict[tuple[str, str], _Entry] = OrderedDict()
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    async def save(self, task: Task, context: ServerCallContext) -> None:
        key = (context.user.user_name, task.id)
        stored = _copy(task)
        entry = _Entry(
            stored,
            stored.ByteSize(),
            sum(a.ByteSize() for a in stored.artifacts),
            self.clock(),
        )
        old = self._entries.pop(key, None)
        if old is not None:
            self.bytes -= old.size
        self._entries[key] = entry
        self.bytes += entry.size
        await self.trim()

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        await self.trim()
        entry = self._entries.get((context.user.user_name, task_id))
        return None if entry is None else _copy(entry.task)

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        entry = self._entries.pop((context.user.user_name, task_id), None)
        if entry is not None:
            self.bytes -= entry.size

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        """The caller's tasks, newest first, a page at a time: ``page_size`` tasks (50 by
        default) and at most ``page_bytes`` of them."""
        await self.trim()
        owner = context.user.user_name
        after = None
        if params.page_token:
            cursor = decode_list_tasks_cursor(params.page_token)
            if cursor is None:
                raise InvalidParamsError(message="The page token is not one this server gave.")
            after = cursor.sort_key()
        since = (
            params.status_timestamp_after.ToNanoseconds()
            if params.HasField("status_timestamp_after")
            else None
        )
        chosen = [
            entry
            for (who, _), entry in self._entries.items()
            if who == owner
            and (not params.context_id or entry.task.context_id == params.context_id)
            and (not params.status or entry.task.status.state == params.status)
            and (since is None or _sort_key(entry.task)[1] >= since)
        ]
        chosen.sort(key=lambda e: _sort_key(e.task), reverse=True)
        total = len(chosen)
        if after is not None:
            chosen = [e for e in chosen if _sort_key(e.task) < after]
        page_size = params.page_size or DEFAULT_LIST_TASKS_PAGE_SIZE
        page: list[Task] = []
        used = 0
        for entry in chosen[:page_size]:
            size = entry.size - (0 if params.include_artifacts else entry.artifact_size)
            if page and used + size > self.limits.page_bytes:
                break
            used += size
            task = _copy(entry.task)
            if not params.include_artifacts:
                task.ClearField("artifacts")
            page.append(task)
        more = len(page) < len(chosen)
        token = ""
        if more:
            stamped, nanos, task_id = _sort_key(page[-1])
            token = encode_list_tasks_cursor(ListTasksCursor(nanos if stamped else None, task_id))
        return ListTasksResponse(
            tasks=page, next_page_token=token, total_size=total, page_size=page_size
        )

    async def trim_forever(self) -> None:
        """Drop the tasks grown too old now and then, even when nobody asks the store."""
        while True:
            await asyncio.sleep(max(1.0, min(60.0, self.limits.max_age / 4)))
            await self.trim()

    async def trim(self) -> None:
        """Drop finished tasks, oldest update first, while over a bound or too old."""
        limits, now = self.limits, self.clock()
        dropped = []
        for key, entry in list(self._entries.items()):
            if not entry.finished:
                continue
            over = len(self._entries) > limits.max_tasks or self.bytes > limits.max_bytes
            if not over and now - entry.updated <= limits.max_age:
                break  # the rest were updated later
            del self._entries[key]
            self.bytes -= entry.size
            dropped.append(key)
        if self.on_drop is not None:
            for owner, task_id in dropped:
                await self.on_drop(owner, task_id)
