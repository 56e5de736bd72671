"""A requests-per-minute limit toward the LLM endpoint, shared by every task of a batch.

A reservation scheduler (GCRA) hands out delays instead of sleeping, so the same object serves
one event loop (the local backend) and, in one Ray actor, a whole cluster (callers wait on
their side). Requests are spread evenly; up to ``burst`` may go back to back after a lull.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable


def default_burst(per_minute: float) -> int:
    """One second's worth of requests, at least one."""
    return max(1, math.floor(per_minute / 60))


class RateSchedule:
    """Hands out request slots at ``per_minute`` on average, ``burst`` at most at once."""

    def __init__(
        self,
        per_minute: float,
        burst: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if per_minute <= 0:
            raise ValueError(f"the rate limit must be positive, not {per_minute}")
        self.per_minute = per_minute
        self.burst = burst if burst is not None else default_burst(per_minute)
        if self.burst < 1:
            raise ValueError(f"burst must be at least 1, not {self.burst}")
        self.interval = 60.0 / per_minute
        self._clock = clock
        self._lock = threading.Lock()
        self._next = clock()  # theoretical arrival time of the next request

    def reserve(self) -> float:
        """Claim the next slot; returns the seconds to wait before sending (0 = now)."""
        with self._lock:
            now = self._clock()
            arrival = max(self._next, now)
            allowed_at = arrival - (self.burst - 1) * self.interval
            self._next = arrival + self.interval
            return max(0.0, allowed_at - now)
