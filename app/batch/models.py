"""What a batch reads and writes: one task per input line, one result per output line."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, field_validator

#: How a task ended: the agent's own states, plus the two the batch itself decides.
TaskState = Literal["FINISHED", "IDLE", "ERROR", "TIMEOUT", "CRASHED"]
TaskStatus = Literal["done", "failed"]
FINISHED: TaskStatus = "done"
FAILED: TaskStatus = "failed"


class BatchTask(BaseModel):
    """One line of the tasks file.

    ``files`` are copied into the task's workspace before it starts: a list of paths (placed
    under their own names) or a mapping ``{"name in workspace": "source path"}``. Relative
    sources are taken from the tasks file's directory.
    """

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    prompt: str = Field(min_length=1)
    agent: str | None = None
    flow: str | None = None
    max_steps: PositiveInt | None = None
    timeout: PositiveFloat | None = None
    files: dict[str, str] = Field(default_factory=dict)
    expected: str | None = None
    match: Literal["exact", "contains"] = "exact"

    @field_validator("id", mode="before")
    @classmethod
    def _id_text(cls, value: Any) -> Any:
        # GAIA-style sets use numbers or UUIDs; keep them as text so ids compare reliably.
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        return value.strip() if isinstance(value, str) else value

    @field_validator("prompt")
    @classmethod
    def _prompt_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("prompt is blank")
        return value

    @field_validator("expected", mode="before")
    @classmethod
    def _expected_text(cls, value: Any) -> Any:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return str(value)
        return value

    @field_validator("files", mode="before")
    @classmethod
    def _files_mapping(cls, value: Any) -> Any:
        if value is None:
            return {}
        if isinstance(value, list):
            mapping: dict[str, str] = {}
            for item in value:
                if not isinstance(item, str) or not item.strip():
                    raise ValueError("files must hold non-empty path strings")
                name = Path(item).name
                if name in mapping:
                    raise ValueError(f"two files would both be placed as {name!r}")
                mapping[name] = item
            return mapping
        return value

    def resolve_files(self, base: Path) -> BatchTask:
        """A copy whose file sources are absolute (relative ones start at ``base``)."""
        files = {dest: str((base / src).resolve()) for dest, src in self.files.items()}
        return self.model_copy(update={"files": files})


class TaskResult(BaseModel):
    """One line of the results file. ``duration`` and ``started_at`` are the only timings."""

    model_config = ConfigDict(extra="ignore")

    id: str
    status: TaskStatus
    state: TaskState
    final_answer: str | None = None
    expected: str | None = None
    correct: bool | None = None
    steps: int | None = None
    usage: dict[str, int] = Field(default_factory=dict)
    cost: float | None = None
    duration: float = 0.0
    started_at: float = 0.0
    error: str | None = None
    agent: str | None = None
    flow: str | None = None
    workspace: str | None = None
    session_file: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == FINISHED


#: What a backend calls as each task begins, and (from the runner's event loop) as it ends.
StartCallback = Callable[[BatchTask], None]
ResultCallback = Callable[[TaskResult], None]
