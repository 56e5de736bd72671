"""Record every LLM exchange of a run to a JSON-lines file, and replay a run from it offline
(the tools really run; the first difference from the recorded request is reported).

The tape is a context variable, so it covers every ``LLM`` the run touches and nothing outside
the block. It sits around every model (the :class:`Recording` wrapper, under the retries: each
attempt passes through it) and holds our types, not wire bodies: what the model was asked
(``Message``s, tools, tool choice) and what it answered (a ``ModelResponse``), so a tape is the
same whichever wire API made it, and a run recorded on one provider replays on any. Wire
bodies are the recording proxy's business (``app.testing.RecordingProxy``).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, TypeVar

from app.exceptions import ReplayError
from app.llm.deltas import deliver
from app.llm.messages import typed, upstream_dicts
from app.llm.model import Model, ModelParams, ModelResponse
from app.llm.usage import Usage
from app.logger import logger, redact_registered
from app.schema import Message

FORMAT = "openmanus-llm-recording"
#: 2: our types. 1 (still replayed): OpenAI chat-completion bodies.
VERSION = 2


class Tape:
    """Sits between an ``LLM``'s retries and its model for every attempt."""

    async def exchange(
        self, messages: Sequence[Message], params: ModelParams, inner: Model
    ) -> ModelResponse:
        raise NotImplementedError


active_tape: ContextVar[Tape | None] = ContextVar("openmanus_llm_tape", default=None)


class Recording:
    """Wraps ``inner``: each attempt goes through the context's tape, when a block set one."""

    def __init__(self, inner: Model) -> None:
        self.inner = inner
        self.name = inner.name

    async def request(self, messages: Sequence[Message], params: ModelParams) -> ModelResponse:
        tape = active_tape.get()
        if tape is None:
            return await self.inner.request(messages, params)
        return await tape.exchange(messages, params, self.inner)


def request_view(
    messages: Sequence[Message], params: ModelParams, version: int = VERSION
) -> dict[str, Any]:
    """What a request asked, as a tape keeps it (``version`` 1: OpenAI's chat shape)."""
    view: dict[str, Any] = {
        "messages": [m.to_dict() for m in messages] if version >= 2 else upstream_dicts(messages)
    }
    if params.tools:
        view["tools"] = [tool.to_param() for tool in params.tools]
        view["tool_choice"] = params.tool_choice
    return view


def response_view(response: ModelResponse) -> dict[str, Any]:
    view: dict[str, Any] = {
        "message": response.message.to_dict(),
        "finish_reason": response.finish_reason,
        "usage": response.usage.model_dump(exclude_defaults=True),
    }
    if response.reasoning:
        view["reasoning"] = response.reasoning
    return view


def recorded_response(data: dict[str, Any]) -> ModelResponse:
    """A recorded response as a ``ModelResponse`` (also an OpenAI completion body, as
    version 1 tapes hold)."""
    if "choices" in data:  # version 1
        choice = (data.get("choices") or [{}])[0]
        message = dict(choice.get("message") or {"role": "assistant"})
        return ModelResponse(
            message=typed(message),
            usage=Usage.from_api(data.get("usage")) or Usage(),
            finish_reason=choice.get("finish_reason"),
            reasoning=message.get("reasoning_content"),
        )
    return ModelResponse(
        message=Message.model_validate(data.get("message") or {"role": "assistant"}),
        usage=Usage.model_validate(data.get("usage") or {}),
        finish_reason=data.get("finish_reason"),
        reasoning=data.get("reasoning"),
    )


class Recorder(Tape):
    """Appends each exchange to ``path`` as it happens (flushed, so a crash keeps them)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.count = 0
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        header = {"type": "header", "format": FORMAT, "version": VERSION, "created": time.time()}
        self.path.write_text(json.dumps(header) + "\n", encoding="utf-8")

    async def exchange(
        self, messages: Sequence[Message], params: ModelParams, inner: Model
    ) -> ModelResponse:
        response = await inner.request(messages, params)
        self.count += 1
        entry = {
            "type": "exchange",
            "index": self.count - 1,
            "model": inner.name,
            "request": request_view(messages, params),
            "response": response_view(response),
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
        self.version, self.entries = _read_recording(self.path)
        self.served = 0
        self.mismatches: list[str] = []

    async def exchange(
        self, messages: Sequence[Message], params: ModelParams, inner: Model
    ) -> ModelResponse:
        model, index = inner.name, self.served
        if index >= len(self.entries):
            raise ReplayError(
                f"Replay of {self.path}: the run made request {index + 1}, but the recording "
                f"holds only {len(self.entries)}. The run has departed from the recording.",
                model=model,
            )
        entry = self.entries[index]
        self.served += 1
        current = request_view(messages, params, self.version)
        recorded = entry.get("request")
        try:
            difference = describe_difference(
                recorded if isinstance(recorded, dict) else {}, current
            )
        except (AttributeError, TypeError):  # a hand-edited tape: not comparable
            difference = "the recorded request is not readable"
        if difference is not None:
            problem = (
                f"Replay of {self.path}: request {index + 1} departs from the "
                f"recording: {difference}"
            )
            self.mismatches.append(problem)
            if self.strict:
                raise ReplayError(problem, model=model)
            logger.warning(problem)
        try:
            response = recorded_response(entry.get("response") or {})
        except (ValueError, TypeError, AttributeError, IndexError) as e:
            raise ReplayError(
                f"Replay of {self.path}: recorded response {index + 1} is not one: {e}",
                model=model,
            ) from e
        await deliver(params.on_delta, response.message.content)
        return response

    @property
    def remaining(self) -> int:
        return len(self.entries) - self.served


def _read_recording(path: Path) -> tuple[int, list[dict[str, Any]]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise ReplayError(f"Cannot read the recording {path}: {e}") from e
    entries: list[dict[str, Any]] = []
    version = 1
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
            stated = item.get("version")
            version = stated if isinstance(stated, int) and stated >= 1 else 1
        elif isinstance(item, dict) and item.get("type") == "exchange":
            entries.append(item)
    if not entries:
        raise ReplayError(f"{path} holds no recorded exchanges")
    return version, entries


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
