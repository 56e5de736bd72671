"""What the runner needs from a backend, and how a backend is picked by name."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from app.batch.execute import ExecutionSettings
from app.batch.models import BatchTask, TaskResult
from app.exceptions import ConfigError

__all__ = ["BACKENDS", "Backend", "ResultCallback", "StartCallback", "make_backend"]

StartCallback = Callable[[BatchTask], None]
#: Called once per task as soon as it ends, from the runner's event loop.
ResultCallback = Callable[[TaskResult], None]

BACKENDS = ("local", "ray")


class Backend(Protocol):
    name: str

    async def run(
        self,
        tasks: Sequence[BatchTask],
        settings: ExecutionSettings,
        *,
        concurrency: int,
        rate_limit: float | None,
        burst: int | None,
        on_start: StartCallback,
        on_result: ResultCallback,
    ) -> None:
        """Run every task, calling ``on_start``/``on_result`` as each begins and ends."""


def make_backend(name: str, **options: Any) -> Backend:
    """``local`` takes no options; ``ray`` takes those of :class:`RayBackend`."""
    if name == "local":
        from app.batch.local import LocalBackend

        if options:
            raise ConfigError(f"the local backend takes no options ({', '.join(options)})")
        return LocalBackend()
    if name == "ray":
        from app.batch.ray_backend import RayBackend

        return RayBackend(**options)
    raise ConfigError(f"unknown backend {name!r}; choose one of: {', '.join(BACKENDS)}")
