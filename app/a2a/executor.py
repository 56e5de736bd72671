"""The A2A executor: each A2A conversation (a caller's context id) is one Manus with its own
workspace and session file; its typed events become the task's status and artifact updates,
redacted (:mod:`app.redaction`) before any leaves the server. A conversation unused for a while
is closed, and reopened from its session file (memory restored) by its next message, after a
server restart too. Each caller's conversations live apart (:class:`app.a2a.identity.Caller`):
another caller naming the same context id gets a conversation of its own.

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
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from a2a.server.agent_execution import AgentExecutor, RequestContext, SimpleRequestContextBuilder
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskStore, TaskUpdater
from a2a.types import Message, Part, SendMessageRequest, Task, TaskState, TaskStatus

from app.a2a.identity import DEFAULT_CALLER, Caller, CallerUser
from app.a2a.store import FINISHED
from app.agent.manus import Manus
from app.agent.result import RunResult
from app.events import Event, Thought, ToolCallEvent, ToolResultEvent
from app.exceptions import SessionError
from app.logger import logger
from app.redaction import redact_text, redact_tree
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


@dataclass
class _Space:
    """One caller's conversations on disk: ``root/<session id>/`` each, their session files in
    ``root/.sessions``."""

    root: Path
    store: SessionStore
    #: context id -> session id of every conversation on disk (read on first need).
    sessions: dict[str, str] | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class ManusExecutor(AgentExecutor):
    """Runs Manus for the A2A server (upstream's name). Conversations live under ``root``
    (a named caller's under ``root/callers/<name>/``); ``tasks`` is the server's task store,
    asked whether a task that holds a conversation has ended."""

    def __init__(
        self,
        root: Path,
        agent_factory: AgentFactory | None = None,
        *,
        idle_timeout: float | None = 3600.0,
        tasks: TaskStore | None = None,
    ) -> None:
        self.root = root
        self.agent_factory = agent_factory or manus_factory()
        self.idle_timeout = idle_timeout
        self.tasks = tasks
        #: (caller's owner, context id) -> its open conversation.
        self.conversations: dict[tuple[str, str], Conversation] = {}
        self._spaces: dict[str, _Space] = {}
        # One per conversation being opened or closed; gone with its last user.
        self._opening: weakref.WeakValueDictionary[tuple[str, str], asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )

    def _space(self, caller: Caller) -> _Space:
        space = self._spaces.get(caller.owner)
        if space is None:
            root = caller.root(self.root)
            space = self._spaces[caller.owner] = _Space(root, SessionStore(root / ".sessions"))
        return space

    def _lock(self, key: tuple[str, str]) -> asyncio.Lock:
        lock = self._opening.get(key)
        if lock is None:
            lock = self._opening[key] = asyncio.Lock()
        return lock

    async def conversation(self, caller: Caller, context_id: str) -> Conversation:
        """The caller's conversation ``context_id``, made on its first task."""
        key = (caller.owner, context_id)
        async with self._lock(key):
            found = self.conversations.get(key)
            if found is not None:
                return found
            space = self._space(caller)
            async with space.lock:
                if space.sessions is None:
                    space.sessions = await asyncio.to_thread(_known_sessions, space.store)
            data, recorder = await asyncio.to_thread(
                _open_session, space, caller, context_id, space.sessions.get(context_id)
            )
            workspace = space.root / recorder.session_id
            try:
                agent = await self.agent_factory(workspace)
                if data is not None:
                    data.restore_agent(agent)
            except BaseException:
                await recorder.close()
                raise
            recorder.attach_agent(agent, already_written=data is not None)
            space.sessions[context_id] = recorder.session_id
            conv = Conversation(context_id, agent, recorder, workspace)
            self.conversations[key] = conv
            how = "reopened" if data is not None else "new"
            logger.info(
                f"A2A context {context_id} of {caller.name}: {how} session {recorder.session_id}"
            )
            return conv

    async def close_idle(self) -> int:
        """Close the conversations idle for ``idle_timeout`` seconds (their next message
        reopens them); how many were closed."""
        if self.idle_timeout is None:
            return 0
        limit, closed = self.idle_timeout, 0
        for key, conv in [(k, c) for k, c in self.conversations.items() if c.idle > limit]:
            async with self._lock(key):
                if self.conversations.get(key) is conv and conv.idle > limit:
                    del self.conversations[key]
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
            conv = await self.conversation(_caller(context.call_context), context_id)
        except Exception as e:  # a busy session file, a failing MCP server...: say so
            logger.exception(f"A2A context {context_id}: cannot open the conversation")
            why = f"The agent could not start: {type(e).__name__}: {e}"
            await updater.failed(_message(updater, why))
            return
        if conv.running and conv.task_id != task_id:
            await self._release_if_ended(conv, context.call_context)
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
        try:
            await self._forward(conv, updater)
        except BaseException:
            # Nobody reports on the run any more (the request failed or was cancelled): it
            # must not go on holding the conversation, or wait for an answer nobody is asked.
            if conv.task_id == task_id:
                await conv.stop()
            raise

    async def _release_if_ended(self, conv: Conversation, call: ServerCallContext) -> None:
        """Stop a run whose task has ended or is gone (a conversation is busy only with a
        task still under way)."""
        if self.tasks is None or conv.task_id is None:
            return
        task = await self.tasks.get(conv.task_id, call)
        if task is None or task.status.state in FINISHED:
            logger.warning(f"A2A task {conv.task_id} ended while its run went on: stopped")
            await conv.stop()

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
        key = (_caller(context.call_context).owner, context.context_id or "")
        conv = self.conversations.get(key)
        if conv is not None and conv.task_id == context.task_id:
            await conv.stop()
        task_id, context_id = context.task_id or "", context.context_id or ""
        updater = TaskUpdater(event_queue, task_id, context_id)
        await updater.cancel(_message(updater, "Canceled by the client."))

    async def close(self) -> None:
        """Stop every run and release every conversation (the server is stopping)."""
        conversations, self.conversations = list(self.conversations.values()), {}
        await asyncio.gather(*(c.close() for c in conversations), return_exceptions=True)


class ContextFromTask(SimpleRequestContextBuilder):
    """A message naming only its task continues that task's conversation: A2A 1.0 (3.4.3)
    says the agent infers the context from the task. The SDK has checked that the task is
    the caller's."""

    def __init__(self, tasks: TaskStore) -> None:
        super().__init__(task_store=tasks)
        self.tasks = tasks

    async def build(
        self,
        context: ServerCallContext,
        params: SendMessageRequest | None = None,
        task_id: str | None = None,
        context_id: str | None = None,
        task: Task | None = None,
    ) -> RequestContext:
        if task_id and not context_id:
            known = await self.tasks.get(task_id, context)
            if known is not None:
                context_id = known.context_id
        return await super().build(context, params, task_id, context_id, task)


def _caller(call: ServerCallContext) -> Caller:
    """Who sent the request (:mod:`app.a2a.jsonrpc` puts the guard's caller in the SDK's
    context; a context built elsewhere is the default caller only when it has no owner)."""
    user = call.user
    if isinstance(user, CallerUser):
        return user.caller
    if user.user_name == DEFAULT_CALLER.owner:
        return DEFAULT_CALLER
    raise RuntimeError(f"an A2A request from an unknown user {user.user_name!r}")


def _open_session(
    space: _Space, caller: Caller, context_id: str, session_id: str | None
) -> tuple[SessionData | None, SessionRecorder]:
    """The conversation's session file (locked), and the workspace beside it."""
    space.root.mkdir(parents=True, exist_ok=True)
    data = None
    if session_id is not None:
        data, recorder = space.store.resume(session_id)
    else:
        recorder = space.store.start(
            "agent", program="openmanus_a2a", a2a_context=context_id, a2a_caller=caller.name
        )
    (space.root / recorder.session_id).mkdir(exist_ok=True)
    return data, recorder


def _known_sessions(store: SessionStore) -> dict[str, str]:
    """Which session file holds which conversation, from their headers."""
    found: dict[str, str] = {}
    with open_session_dir(store.directory, create=False) as dir_fd:
        if dir_fd is None:
            return found
        for name, _ in sorted(session_files(dir_fd), key=lambda item: item[1]):
            path = store.directory / name
            try:
                data = read_session(path, read_file(dir_fd, path))
            except (SessionError, OSError):
                continue
            context = data.header.get("a2a_context")
            if isinstance(context, str):
                found[context] = data.id
    return found


def manus_factory(max_steps: int | None = None) -> AgentFactory:
    """Upstream's agent for each conversation: a Manus in its workspace."""

    async def create(workspace: Path) -> Manus:
        extra: dict[str, Any] = {"max_steps": max_steps} if max_steps else {}
        return await Manus.create(workspace=workspace, **extra)

    return create


def _message(updater: TaskUpdater, text: str, **metadata: Any) -> Message:
    """A message to the client: its text and metadata redacted."""
    return updater.new_agent_message(
        [Part(text=redact_text(text))], metadata=redact_tree(metadata) or None
    )


async def _artifact(updater: TaskUpdater, part: Part, name: str, metadata: dict[str, Any]) -> None:
    """An artifact to the client: its name, metadata and text redacted (a file's bytes are
    redacted by :func:`_file_part`)."""
    if part.HasField("text"):
        part.text = redact_text(part.text)
    if part.filename:
        part.filename = redact_text(part.filename)
    await updater.add_artifact(
        [part], name=redact_text(name), metadata=redact_tree(metadata), last_chunk=True
    )


def _file_part(data: bytes, name: str, media: str) -> tuple[Part, bool]:
    """A file's part, and whether redaction changed it: a text file with what the redactor
    finds replaced; a binary file in which it finds something is withheld (named only)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        # Every byte a character, so a secret's bytes are found wherever they are.
        as_text = data.decode("latin-1")
        if redact_text(as_text) == as_text:
            return Part(raw=data, filename=name, media_type=media), False
        why = f"{name}: withheld, it contains what looks like a secret; it stays in the workspace."
        return Part(text=why), True
    cleaned = redact_text(text)
    return Part(raw=cleaned.encode("utf-8"), filename=name, media_type=media), cleaned != text


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
        output = redact_text(event.output)  # before the cut, which could halve a secret
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
    """Each file the task wrote in its workspace as an artifact named by its path (its bytes,
    redacted, and media type; a larger one by name only), read without following links."""
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
        metadata: dict[str, Any] = {"kind": "file", "path": path, "size": size}
        try:
            if size > _MAX_FILE_BYTES:
                why = f"{path}: {size} bytes, too large to attach; it stays in the workspace."
                part = Part(text=why)
            else:
                data = await asyncio.to_thread(os.read, fd, _MAX_FILE_BYTES)
                part, metadata["redacted"] = _file_part(data, name, media)
        finally:
            os.close(fd)
        await _artifact(updater, part, path, metadata)


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
        metadata = {
            "kind": "answer",
            "stop_reason": result.stop_reason.value,
            "steps": result.steps,
            "usage": result.usage.model_dump(),
        }
        await _artifact(updater, Part(text=answer), f"task_{updater.task_id}", metadata)
    if result.ok:
        await updater.complete()
    else:
        why = result.failure or f"it stopped after {result.steps} steps without finishing"
        await updater.failed(_message(updater, f"The agent did not finish: {why}"))
