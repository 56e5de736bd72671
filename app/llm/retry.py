"""Retrying transient LLM failures (rate limits, timeouts, dropped connections, 5xx).

Only ``LLMTransientError`` is retried: a bad key or an oversized prompt fails at once. The
first attempt, which nearly always succeeds, runs bare; tenacity takes over only once it has
failed, so the hot path pays nothing for retries.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from app.exceptions import LLMError, LLMRateLimitError, LLMTransientError
from app.logger import logger

if TYPE_CHECKING:
    from app.config_models import LLMSettings

__all__ = ["MAX_RETRY_AFTER", "retry_delay", "with_retries"]

#: A Retry-After longer than this (seconds) is not waited for: the error goes to the caller.
MAX_RETRY_AFTER = 300.0


async def with_retries(
    attempt: Callable[[], Awaitable[Any]], *, max_retries: int, settings: LLMSettings
) -> Any:
    """Run ``attempt`` again on transient failures, with exponential backoff and jitter;
    rate limits wait at least as long as the server's Retry-After asks."""
    try:
        return await attempt()
    except LLMTransientError as first:
        if max_retries <= 0 or not _retryable(first):
            _gave_up(first, 1)
            raise
        return await _retry(attempt, first, max_retries, settings)


def retry_delay(settings: LLMSettings, number: int, error: LLMError) -> float:
    """Seconds to wait before retry ``number`` (1-based) after ``error``."""
    backoff = min(settings.retry_max_wait, settings.retry_min_wait * 2 ** (number - 1))
    backoff += random.uniform(0, settings.retry_min_wait)
    if isinstance(error, LLMRateLimitError) and error.retry_after is not None:
        return max(error.retry_after, backoff)
    return backoff


async def _retry(
    attempt: Callable[[], Awaitable[Any]],
    first: LLMTransientError,
    max_retries: int,
    settings: LLMSettings,
) -> Any:
    from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

    failures: list[LLMTransientError] = [first]

    def wait(state: RetryCallState | None) -> float:
        outcome = state.outcome if state is not None else None
        error = outcome.exception() if outcome is not None else None
        if isinstance(error, LLMTransientError):
            failures.append(error)
        number = len(failures)
        delay = retry_delay(settings, number, failures[-1])
        logger.warning(
            f"LLM request failed ({failures[-1]}); retry {number}/{max_retries} in {delay:.2f}s"
        )
        return delay

    async def again() -> Any:  # ``attempt`` may be a lambda: tenacity wants a coroutine fn
        return await attempt()

    await asyncio.sleep(wait(None))  # the first failure is already known
    retrying = AsyncRetrying(
        retry=retry_if_exception(lambda e: isinstance(e, LLMTransientError) and _retryable(e)),
        stop=stop_after_attempt(max_retries),
        wait=wait,
        sleep=asyncio.sleep,
        reraise=True,
    )
    try:
        return await retrying(again)
    except LLMTransientError as e:
        _gave_up(e, retrying.statistics.get("attempt_number", 0) + 1)
        raise


def _retryable(error: LLMTransientError) -> bool:
    retry_after = getattr(error, "retry_after", None)
    return retry_after is None or retry_after <= MAX_RETRY_AFTER


def _gave_up(error: LLMTransientError, attempts: int) -> None:
    """Say in the error how many attempts were made (once several were)."""
    if attempts > 1:
        error.message = f"{error.message} (gave up after {attempts} attempts)"
        error.args = (error.message,)
    error.attempts = attempts  # type: ignore[attr-defined]
