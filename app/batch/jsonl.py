"""Reading the tasks file and keeping the results file: the batch's only durable state.

Each result is appended and flushed as its task ends, so a kill loses only running tasks; the
next run skips every id with a result (unless it failed and ``retry_failed`` is set), drops a
line torn by the kill, and an exclusive lock keeps two batches out of one file.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import IO, Any

from pydantic import ValidationError

from app.batch.models import BatchTask, TaskResult
from app.exceptions import ConfigError
from app.redaction import redact_text

_MAX_REPORTED = 20


class BatchInputError(ConfigError):
    """The tasks file (or the results file to resume from) cannot be used as it is."""


def load_tasks(path: str | Path) -> list[BatchTask]:
    """Every task of a JSONL file, checked before anything runs; all problems are reported
    together, so a thousand-task file is fixed in one go. Blank and ``#`` lines are skipped."""
    source = Path(path)
    try:
        lines = source.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise BatchInputError(f"cannot read the tasks file {source}: {e}") from e
    base = source.resolve().parent
    tasks: list[BatchTask] = []
    problems: list[str] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        try:
            data = json.loads(text)
        except ValueError as e:
            problems.append(f"line {number}: not valid JSON ({e})")
            continue
        if not isinstance(data, dict):
            problems.append(f"line {number}: expected a JSON object, got {type(data).__name__}")
            continue
        try:
            task = BatchTask.model_validate(data)
        except ValidationError as e:
            for err in e.errors():
                where = ".".join(str(p) for p in err["loc"]) or "task"
                problems.append(f"line {number}: {where}: {err['msg']}")
            continue
        if task.id in seen:
            problems.append(
                f"line {number}: duplicate id {task.id!r} (first on line {seen[task.id]})"
            )
            continue
        seen[task.id] = number
        tasks.append(task.resolve_files(base))
    if problems:
        shown = "\n  ".join(problems[:_MAX_REPORTED])
        more = len(problems) - _MAX_REPORTED
        extra = f"\n  ... and {more} more" if more > 0 else ""
        raise BatchInputError(f"{source}: {len(problems)} problem(s):\n  {shown}{extra}")
    if not tasks:
        raise BatchInputError(f"{source}: no tasks (one JSON object per line)")
    return tasks


def read_results(path: str | Path) -> dict[str, TaskResult]:
    """The latest result per task id (a rerun's line supersedes an earlier one)."""
    results, _ = _read(Path(path))
    return results


def _read(path: Path) -> tuple[dict[str, TaskResult], int]:
    """Results and the byte length of the file's intact part (a torn last line excluded)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}, 0
    except OSError as e:
        raise BatchInputError(f"cannot read the results file {path}: {e}") from e
    results: dict[str, TaskResult] = {}
    offset = 0
    for raw in data.splitlines(keepends=True):
        if not raw.endswith(b"\n"):
            break  # a line cut short by a kill: that task runs again
        offset += len(raw)
        if not raw.strip():
            continue
        try:
            result = TaskResult.model_validate_json(raw)
        except ValidationError as e:
            line = data[:offset].count(b"\n")
            raise BatchInputError(
                f"{path}, line {line}: not a batch result ({e.errors()[0]['msg']}); "
                "use another --output or remove the line"
            ) from e
        results[result.id] = result
    return results, offset


class ResultLog:
    """The results file, opened for appending under an exclusive lock."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._file: IO[bytes] | None = None
        self.results: dict[str, TaskResult] = {}

    def open(self) -> ResultLog:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(self.path, "ab+")  # kept open (and locked) for the whole batch
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise BatchInputError(
                f"another batch is writing to {self.path}; wait for it or use another --output"
            ) from None
        try:
            self.results, intact = _read(self.path)
            if intact < os.fstat(handle.fileno()).st_size:
                handle.truncate(intact)  # drop the torn line so appends start on a fresh line
        except BaseException:
            handle.close()
            raise
        self._file = handle
        return self

    def append(self, result: TaskResult) -> None:
        """Write one result line and flush it to the OS before returning. The answer and the
        error go through the session files' redactor: the process's registered secrets (the
        API keys, in every encoding) never reach the file, what the model wrote otherwise
        stays as written."""
        if self._file is None:
            raise RuntimeError("ResultLog.append() before open()")
        result = _redacted(result)
        line = result.model_dump_json().encode("utf-8") + b"\n"
        self._file.write(line)
        self._file.flush()
        self.results[result.id] = result

    def close(self) -> None:
        handle, self._file = self._file, None
        if handle is not None:
            try:
                os.fsync(handle.fileno())
            finally:
                handle.close()

    def __enter__(self) -> ResultLog:
        return self.open()

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _redacted(result: TaskResult) -> TaskResult:
    texts = {"final_answer": result.final_answer, "error": result.error}
    update = {k: redact_text(v, registered_only=True) for k, v in texts.items() if v}
    return result.model_copy(update=update) if update else result
