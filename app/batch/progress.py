"""The progress line on stderr: counts, throughput and ETA; redrawn in place on a terminal,
else a new line at most every ``interval`` seconds, so a big batch does not bury the log."""

from __future__ import annotations

import sys
import time
from typing import TextIO

_BAR = 24


def format_duration(seconds: float) -> str:
    whole = max(0, round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


class Progress:
    """Counts for one run of a batch; ``skipped`` tasks already had results."""

    def __init__(
        self,
        total: int,
        skipped: int = 0,
        *,
        stream: TextIO | None = None,
        enabled: bool = True,
        interval: float | None = None,
    ) -> None:
        self.total = total
        self.skipped = skipped
        self.done = 0
        self.failed = 0
        self.running = 0
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.interval = interval if interval is not None else (0.2 if self.tty else 10.0)
        self._started = time.monotonic()
        self._last_draw = 0.0

    @property
    def finished(self) -> int:
        return self.done + self.failed

    def task_started(self) -> None:
        self.running += 1
        self._draw()

    def task_ended(self, ok: bool) -> None:
        self.running -= 1
        if ok:
            self.done += 1
        else:
            self.failed += 1
        self._draw()

    def render(self) -> str:
        elapsed = time.monotonic() - self._started
        to_run = self.total - self.skipped
        remaining = to_run - self.finished
        rate = self.finished / elapsed if elapsed > 0 else 0.0
        eta = format_duration(remaining / rate) if rate > 0 and remaining else "--:--:--"
        if not remaining:
            eta = "0:00:00"
        filled = int(_BAR * (self.finished + self.skipped) / self.total) if self.total else _BAR
        bar = "#" * filled + "-" * (_BAR - filled)
        skipped = f" (+{self.skipped} earlier)" if self.skipped else ""
        return (
            f"[{bar}] {self.finished + self.skipped}/{self.total}{skipped} | done {self.done} "
            f"failed {self.failed} running {self.running} | {rate:.2f} tasks/s | "
            f"elapsed {format_duration(elapsed)} ETA {eta}"
        )

    def _draw(self, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now - self._last_draw < self.interval:
            return
        self._last_draw = now
        line = self.render()
        if self.tty:
            self.stream.write("\r\x1b[2K" + line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self) -> None:
        """Draw the final state and end the line."""
        if not self.enabled:
            return
        self._draw(force=True)
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()
