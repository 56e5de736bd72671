"""The A2A executor: each A2A conversation (context id) is one Manus with its own workspace and
session file; its typed events become the task's status and artifact updates. A conversation
unused for a while is closed, and reopened from its session file (memory restored) by its next
message, after a server restart too.

A task's run goes on beside the SDK's request: when the agent calls ``ask_human`` the task turns
``input-required`` and the request returns, the run waiting on the question; the client's next
message on that task is the answer, and the same run carries on. Cancelling stops the run (as
Ctrl-C does: tools cleaned up, the conversation still usable).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import Message, Part, Task, TaskState, TaskStatus

from app.agent.manus import Manus
from app.agent.result import RunResult
from app.events import Event, Thought, ToolCallEvent, ToolResultEvent
from app.exceptions import SessionError
from app.logger import logger
from app.session import SessionData, SessionRecorder, SessionStore, read_session
from app.session.files import open_session_dir, read_file, session_files
from app.tool.ask_human import CallbackInputProvider
from app.web.files import Workspace

#: Builds the agent of a new conversation in its workspace.
AgentFactory = Callable[[Path], Awaitable[Manus]]

#: The longest tool output a status message carries (the whole output stays in the session).
_OUTPUT_CHARS = 4000
#: Files a task wrote come back as artifacts: at most so many, each at most so large.
_MAX_FILES = 20
_MAX_FILE_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class _Question:
    text: str


@dataclass(frozen=True, slots=True)
class _Finished:
    result: RunResult | None = None
    error: BaseException | None = None
    cancelled: bool = False


_Item = Event | _Question | _Finished


class Conversation:
    """One A2A context: its agent (memory carries over from task to task), workspace and
    session file, and the task running in it (one at a time)."""

    def __init__(
        self, context_id: str, agent: Manus, recorder: SessionRecorder, workspace: Path
    ) -> None:
        self.context_id = context_id
        self.agent = agent
        self.recorder = recorder
        self.workspace = workspace
        self.task_id: str | None = None
        self.started = 0.0  # when the task began (epoch seconds): its files are newer
        self.items: asyncio.Queue[_Item] = asyncio.Queue()
        self.runner: asyncio.Task[None] | None = None
        self.answer: asyncio.Future[str | None] | None = None
        self.last_used = time.monotonic()
        agent.events.subscribe(self._on_event)
        tool = agent.available_tools.tool_map.get("ask_human")
        if tool is not None:
            tool.input_provider = CallbackInputProvider(self.ask)

    @property
    def running(self) -> bool:
        return self.runner is not None and not self.runner.done()

    @property
    def waiting(self) -> bool:
        """Whether the run waits for the client to answer ``ask_human``."""
        return self.answer is not None and not self.answer.done()

    def _on_event(self, event: Event) -> None:
        self.items.put_nowait(event)

    async def ask(self, question: str) -> str | None:
        """``ask_human``'s provider: the question goes to the client, the run waits."""
        future: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        self.answer = future
        self.items.put_nowait(_Question(question))
        try:
            return await future
        finally:
            self.answer = None

    @property
    def idle(self) -> float:
        """Seconds without a task (0 while one runs or waits for an answer)."""
        return 0.0 if self.running else time.monotonic() - self.last_used

    def start(self, task_id: str, prompt: str) -> None:
        self.task_id = task_id
        self.started = time.time()
        self.items = asyncio.Queue()
        self.runner = asyncio.create_task(self._run(prompt), name=f"a2a-task-{task_id}")

    async def _run(self, prompt: str) -> None:
        self.recorder.note("task", prompt=prompt)
        try:
            result = await self.agent.run(prompt)
        except asyncio.CancelledError:
            self.items.put_nowait(_Finished(cancelled=True))
            raise
        except Exception as e:  # a bug or misuse: the task fails, the conversation stays
            logger.exception(f"A2A task {self.task_id}: the run failed")
            self.items.put_nowait(_Finished(error=e))
        else:
            self.items.put_nowait(_Finished(result=result))
        finally:
            self.last_used = time.monotonic()

    async def stop(self) -> None:
        """Stop the running task (its tools clean up); returns once it has wound down."""
        if self.answer is not None:
            self.answer.cancel()
        runner = self.runner
        if runner is not None and not runner.done():
            runner.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await runner
        self.task_id = None

    async def close(self) -> None:
        await self.stop()
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await asyncio.wait_for(self.agent.cleanup(), timeout=10)
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await self.recorder.close()


class ManusExecutor(AgentExecutor):
    """Runs Manus for the A2A server (upstream's name); conversations live under ``root``:
    ``root/<session id>/`` each, their session files in ``root/.sessions``."""

    def __init__(
        self,
        root: Path,
        agent_factory: AgentFactory | None = None,
        *,
        idle_timeout: float | None = 3600.0,
    ) -> None:
        self.root = root
        self.store = SessionStore(root / ".sessions")
        self.agent_factory = agent_factory or manus_factory()
        self.idle_timeout = idle_timeout
        self.conversations: dict[str, Conversation] = {}
        self._opening: dict[str, asyncio.Lock] = {}
        #: context id -> session id of every conversation on disk (read on first need).
        self._sessions: dict[str, str] | None = None

    async def conversation(self, context_id: str) -> Conversation:
        """The context's conversation, made on its first task."""
        lock = self._opening.setdefault(context_id, asyncio.Lock())
        async with lock:
            found = self.conversations.get(context_id)
            if found is not None:
                return found
            if self._sessions is None:
                self._sessions = await asyncio.to_thread(self._known_sessions)
            data, recorder = await asyncio.to_thread(
                self._open_session, context_id, self._sessions.get(context_id)
            )
            try:
                agent = await self.agent_factory(self.root / recorder.session_id)
                if data is not None:
                    data.restore_agent(agent)
            except BaseException:
                await recorder.close()
                raise
            recorder.attach_agent(agent, already_written=data is not None)
            self._sessions[context_id] = recorder.session_id
            workspace = self.root / recorder.session_id
            conv = Conversation(context_id, agent, recorder, workspace)
            self.conversations[context_id] = conv
            how = "reopened" if data is not None else "new"
            logger.info(f"A2A context {context_id}: {how} session {recorder.session_id}")
            return conv

    def _open_session(
        self, context_id: str, session_id: str | None
    ) -> tuple[SessionData | None, SessionRecorder]:
        """The conversation's session file (locked), and the workspace beside it."""
        self.root.mkdir(parents=True, exist_ok=True)
        data = None
        if session_id is not None:
            data, recorder = self.store.resume(session_id)
        else:
            recorder = self.store.start("agent", program="openmanus_a2a", a2a_context=context_id)
        (self.root / recorder.session_id).mkdir(exist_ok=True)
        return data, recorder

    def _known_sessions(self) -> dict[str, str]:
        """Which session file holds which conversation, from their headers."""
        found: dict[str, str] = {}
        with open_session_dir(self.store.directory, create=False) as dir_fd:
            if dir_fd is None:
                return found
            for name, _ in sorted(session_files(dir_fd), key=lambda item: item[1]):
                path = self.store.directory / name
                try:
                    data = read_session(path, read_file(dir_fd, path))
                except (SessionError, OSError):
                    continue
                context = data.header.get("a2a_context")
                if isinstance(context, str):
                    found[context] = data.id
        return found

    async def close_idle(self) -> int:
        """Close the conversations idle for ``idle_timeout`` seconds (their next message
        reopens them); how many were closed."""
        if self.idle_timeout is None:
            return 0
        limit, closed = self.idle_timeout, 0
        for conv in [c for c in self.conversations.values() if c.idle > limit]:
            async with self._opening.setdefault(conv.context_id, asyncio.Lock()):
                if self.conversations.get(conv.context_id) is conv and conv.idle > limit:
                    del self.conversations[conv.context_id]
                    logger.info(f"A2A context {conv.context_id}: idle, closed")
                    await conv.close()
                    closed += 1
        return closed

    async def reap_forever(self) -> None:
        """Close idle conversations now and then, until cancelled."""
        if self.idle_timeout is None:
            return
        while True:
            await asyncio.sleep(max(0.5, min(60.0, self.idle_timeout / 4)))
            await self.close_idle()

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = context.task_id, context.context_id
        assert task_id and context_id, "the SDK assigns both ids before execute()"
        updater = TaskUpdater(event_queue, task_id, context_id)
        if context.current_task is None:
            history = [context.message] if context.message is not None else []
            submitted = TaskStatus(state=TaskState.TASK_STATE_SUBMITTED)
            task = Task(id=task_id, context_id=context_id, status=submitted, history=history)
            await event_queue.enqueue_event(task)
        text = context.get_user_input().strip()
        try:
            conv = await self.conversation(context_id)
        except Exception as e:  # a busy session file, a failing MCP server...: say so
            logger.exception(f"A2A context {context_id}: cannot open the conversation")
            why = f"The agent could not start: {type(e).__name__}: {e}"
            await updater.failed(_message(updater, why))
            return
        if conv.task_id == task_id and conv.waiting:
            assert conv.answer is not None
            conv.answer.set_result(text)
            await updater.start_work()
        elif conv.running:
            busy = f"This conversation is busy with task {conv.task_id}; wait for it or cancel it."
            await updater.reject(_message(updater, busy))
            return
        elif not text:
            await updater.reject(_message(updater, "The message has no text for the agent."))
            return
        else:
            conv.start(task_id, text)
            await updater.start_work()
        await self._forward(conv, updater)

    async def _forward(self, conv: Conversation, updater: TaskUpdater) -> None:
        """The run's events as task updates, until it ends or asks the client something."""
        while True:
            item = await conv.items.get()
            if isinstance(item, _Question):
                await updater.requires_input(
                    _message(updater, item.text, kind="question", final=True)
                )
                return
            if isinstance(item, _Finished):
                if not item.cancelled:  # a cancel writes its own state
                    conv.task_id = None
                    await _send_files(updater, conv.workspace, conv.started)
                    await _finish(updater, item)
                return
            update = _status_of(updater, item)
            if update is not None:
                await updater.update_status(TaskState.TASK_STATE_WORKING, update)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Stop the task's run, if it is the one running, and mark the task canceled."""
        conv = self.conversations.get(context.context_id or "")
        if conv is not None and conv.task_id == context.task_id:
            await conv.stop()
        task_id, context_id = context.task_id or "", context.context_id or ""
        updater = TaskUpdater(event_queue, task_id, context_id)
        await updater.cancel(_message(updater, "Canceled by the client."))

    async def close(self) -> None:
        """Stop every run and release every conversation (the server is stopping)."""
        conversations, self.conversations = list(self.conversations.values()), {}
        await asyncio.gather(*(c.close() for c in conversations), return_exceptions=True)


def manus_factory(max_steps: int | None = None) -> AgentFactory:
    """Upstream's agent for each conversation: a Manus in its workspace."""

    async def create(workspace: Path) -> Manus:
        extra: dict[str, Any] = {"max_steps": max_steps} if max_steps else {}
        return await Manus.create(workspace=workspace, **extra)

    return create


def _message(updater: TaskUpdater, text: str, **metadata: Any) -> Message:
    return updater.new_agent_message([Part(text=text)], metadata=metadata or None)


def _status_of(updater: TaskUpdater, event: Event) -> Message | None:
    """A ``working`` status message for the events a watching client cares about."""
    if isinstance(event, Thought) and event.text.strip():
        return _message(updater, event.text, kind="thought", step=event.step)
    if isinstance(event, ToolCallEvent):
        return _message(
            updater,
            f"Calling {event.name}({event.arguments})",
            kind="tool_call",
            step=event.step,
            tool=event.name,
            call_id=event.call_id,
            arguments=event.arguments,
        )
    if isinstance(event, ToolResultEvent):
        output = event.output
        if len(output) > _OUTPUT_CHARS:
            output = output[:_OUTPUT_CHARS] + f"... [{len(event.output)} characters in all]"
        return _message(
            updater,
            output,
            kind="tool_result",
            step=event.step,
            tool=event.name,
            call_id=event.call_id,
            error=event.error,
        )
    return None


async def _send_files(updater: TaskUpdater, workspace: Path, since: float) -> None:
    """Each file the task wrote in its workspace as an artifact named by its path (its bytes
    and media type; a larger one by name only), read without following links."""
    files = Workspace(workspace)
    try:
        written = (await files.recent(since, limit=_MAX_FILES))["files"]
    except Exception as e:  # the workspace went away: the answer still goes out
        logger.warning(f"A2A task {updater.task_id}: cannot list its files: {e}")
        return
    for entry in written:
        path = str(entry["path"])
        try:
            fd, size, media, name = await files.open(path)
        except Exception:  # gone or replaced by a link since it was listed
            continue
        try:
            if size > _MAX_FILE_BYTES:
                why = f"{path}: {size} bytes, too large to attach; it stays in the workspace."
                part = Part(text=why)
            else:
                data = await asyncio.to_thread(os.read, fd, _MAX_FILE_BYTES)
                part = Part(raw=data, filename=name, media_type=media)
        finally:
            os.close(fd)
        metadata = {"kind": "file", "path": path, "size": size}
        await updater.add_artifact([part], name=path, metadata=metadata, last_chunk=True)


async def _finish(updater: TaskUpdater, finished: _Finished) -> None:
    """The answer as the task's artifact (upstream's ``task_<id>``), then its final state; a
    run that did not finish fails, saying why (with its answer so far, if it gave one)."""
    result = finished.result
    if result is None:
        error = finished.error
        why = f"{type(error).__name__}: {error}" if error is not None else "the run ended"
        await updater.failed(_message(updater, f"The agent failed: {why}"))
        return
    answer = result.final_answer
    if result.ok and not answer:
        answer = result.step_results[-1] if result.step_results else "(no written answer)"
    if answer:
        usage = result.usage.model_dump()
        await updater.add_artifact(
            [Part(text=answer)],
            name=f"task_{updater.task_id}",
            metadata={
                "kind": "answer",
                "stop_reason": result.stop_reason.value,
                "steps": result.steps,
                "usage": usage,
            },
            last_chunk=True,
        )
    if result.ok:
        await updater.complete()
    else:
        why = result.failure or f"it stopped after {result.steps} steps without finishing"
        await updater.failed(_message(updater, f"The agent did not finish: {why}"))
