"""Record every LLM exchange of a run to a JSON-lines file, and replay a run from it offline
(the tools really run; the first difference from the recorded request is reported).

The tape is a context variable, so it covers every ``LLM`` the run touches and nothing outside
the block; each attempt of an ``OpenAIChatModel`` passes through it (the :class:`Recording`
transport layer) with its exact wire body.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, TypeVar

from app.exceptions import ReplayError
from app.llm.openai.transport import ChatRequest, Transport, Wrapper, deliver
from app.logger import logger, redact_registered

FORMAT = "openmanus-llm-recording"
_REQUEST_KEYS = ("messages", "tools", "tool_choice")


class Tape:
    """Sits between an ``LLM`` and the endpoint for every exchange."""

    async def exchange(self, request: ChatRequest, inner: Transport) -> dict[str, Any]:
        raise NotImplementedError


active_tape: ContextVar[Tape | None] = ContextVar("openmanus_llm_tape", default=None)


class Recording(Wrapper):
    """Passes each attempt through the context's tape, when a block set one."""

    async def send(self, request: ChatRequest) -> dict[str, Any]:
        tape = active_tape.get()
        if tape is None:
            return await self.inner.send(request)
        return await tape.exchange(request, self.inner)


def _request_view(body: bytes) -> dict[str, Any]:
    data = json.loads(body)
    return {key: data[key] for key in _REQUEST_KEYS if key in data}


class Recorder(Tape):
    """Appends each exchange to ``path`` as it happens (flushed, so a crash keeps them)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.count = 0
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        header = {"type": "header", "format": FORMAT, "version": 1, "created": time.time()}
        self.path.write_text(json.dumps(header) + "\n", encoding="utf-8")

    async def exchange(self, request: ChatRequest, inner: Transport) -> dict[str, Any]:
        response = await inner.send(request)
        self.count += 1
        entry = {
            "type": "exchange",
            "index": self.count - 1,
            "model": request.model,
            "request": _request_view(request.body),
            "response": response,
        }
        line = redact_registered(json.dumps(entry, ensure_ascii=False)) + "\n"
        await asyncio.to_thread(self._append, line)
        return response

    def _append(self, line: str) -> None:
        with self._lock, self.path.open("a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()


class Replayer(Tape):
    """Answers each request with the next recorded response; no request leaves the process."""

    def __init__(self, path: str | Path, *, strict: bool = False) -> None:
        self.path = Path(path)
        self.strict = strict
        self.entries = _read_recording(self.path)
        self.served = 0
        self.mismatches: list[str] = []

    async def exchange(self, request: ChatRequest, inner: Transport) -> dict[str, Any]:
        model, index = request.model, self.served
        if index >= len(self.entries):
            raise ReplayError(
                f"Replay of {self.path}: the run made request {index + 1}, but the recording "
                f"holds only {len(self.entries)}. The run has departed from the recording.",
                model=model,
            )
        entry = self.entries[index]
        self.served += 1
        difference = describe_difference(entry.get("request") or {}, _request_view(request.body))
        if difference is not None:
            problem = (
                f"Replay of {self.path}: request {index + 1} departs from the "
                f"recording: {difference}"
            )
            self.mismatches.append(problem)
            if self.strict:
                raise ReplayError(problem, model=model)
            logger.warning(problem)
        response = entry.get("response") or {}
        await deliver(request.on_delta, _content(response))
        return json.loads(json.dumps(response))  # a fresh copy each time

    @property
    def remaining(self) -> int:
        return len(self.entries) - self.served


def _content(response: dict[str, Any]) -> str | None:
    try:
        return response["choices"][0]["message"].get("content")
    except (KeyError, IndexError, TypeError, AttributeError):
        return None


def _read_recording(path: Path) -> list[dict[str, Any]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise ReplayError(f"Cannot read the recording {path}: {e}") from e
    entries: list[dict[str, Any]] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError as e:
            if number == len(lines):  # a run killed while writing its last exchange
                logger.warning(f"{path}: ignoring the truncated last line {number}")
                break
            raise ReplayError(f"{path} line {number} is not valid JSON: {e}") from e
        if isinstance(item, dict) and item.get("type") == "header":
            if item.get("format") != FORMAT:
                raise ReplayError(f"{path} is not an OpenManus LLM recording")
        elif isinstance(item, dict) and item.get("type") == "exchange":
            entries.append(item)
    if not entries:
        raise ReplayError(f"{path} holds no recorded exchanges")
    return entries


def describe_difference(recorded: dict[str, Any], current: dict[str, Any]) -> str | None:
    """Where ``current`` first differs from ``recorded``, in words; None when they match."""
    old_messages = recorded.get("messages") or []
    new_messages = current.get("messages") or []
    for index, (old, new) in enumerate(zip(old_messages, new_messages, strict=False)):
        if old == new:
            continue
        for key in sorted(set(old) | set(new)):
            if old.get(key) != new.get(key):
                return (
                    f"messages[{index}] ({new.get('role', '?')}) field '{key}': recorded "
                    f"{_clip(old.get(key))}, now {_clip(new.get(key))}"
                )
    if len(old_messages) != len(new_messages):
        return (
            f"the recorded request had {len(old_messages)} messages, this one has "
            f"{len(new_messages)}"
        )
    for key in ("tools", "tool_choice"):
        if recorded.get(key) != current.get(key):
            return f"'{key}' differ"
    return None


def _clip(value: Any, limit: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = text.replace("\n", "\\n")
    return repr(text if len(text) <= limit else text[:limit] + "…")


_T = TypeVar("_T", bound=Tape)


@contextmanager
def _active(tape: _T) -> Iterator[_T]:
    token = active_tape.set(tape)
    try:
        yield tape
    finally:
        active_tape.reset(token)


def recording(path: str | Path) -> AbstractContextManager[Recorder]:
    """Record every LLM exchange made inside the block (and tasks started in it) to ``path``."""
    return _active(Recorder(path))


def replaying(path: str | Path, *, strict: bool = False) -> AbstractContextManager[Replayer]:
    """Serve the LLM exchanges inside the block from the recording at ``path``."""
    return _active(Replayer(path, strict=strict))
