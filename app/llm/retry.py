"""Retrying transient LLM failures (rate limits, timeouts, dropped connections, 5xx, and
malformed replies a bounded number of times).

Only ``LLMTransientError`` is retried: a bad key or an oversized prompt fails at once. The log
says "retry k/N" only for a retry that is really about to happen, with k counting from 1 to
at most N.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from app.exceptions import LLMError, LLMRateLimitError, LLMResponseError, LLMTransientError
from app.logger import logger

if TYPE_CHECKING:
    from app.config_models import LLMSettings

__all__ = ["MAX_RESPONSE_RETRIES", "MAX_RETRY_AFTER", "retry_delay", "with_retries"]

#: A Retry-After longer than this (seconds) is not waited for: the error goes to the caller.
MAX_RETRY_AFTER = 300.0
#: Malformed replies are asked again at most this many times (a hostile or broken model
#: would otherwise burn the whole retry budget on garbage).
MAX_RESPONSE_RETRIES = 2


async def with_retries(
    attempt: Callable[[], Awaitable[Any]], *, max_retries: int, settings: LLMSettings
) -> Any:
    """Run ``attempt`` again on transient failures, with exponential backoff and jitter;
    rate limits wait at least as long as the server's Retry-After asks."""
    done = 0  # retries made so far
    response_retries = 0
    while True:
        try:
            return await attempt()
        except LLMTransientError as error:
            allowed = max_retries
            if isinstance(error, LLMResponseError):
                allowed = min(max_retries, done + MAX_RESPONSE_RETRIES - response_retries)
            if done >= allowed or not _retryable(error):
                _gave_up(error, done + 1)
                raise
            done += 1
            if isinstance(error, LLMResponseError):
                response_retries += 1
            delay = retry_delay(settings, done, error)
            logger.warning(
                f"LLM request failed ({error}); retry {done}/{max_retries} in {delay:.2f}s"
            )
            await asyncio.sleep(delay)


def retry_delay(settings: LLMSettings, number: int, error: LLMError) -> float:
    """Seconds to wait before retry ``number`` (1-based) after ``error``."""
    backoff = min(settings.retry_max_wait, settings.retry_min_wait * 2 ** (number - 1))
    backoff += random.uniform(0, settings.retry_min_wait)
    if isinstance(error, LLMRateLimitError) and error.retry_after is not None:
        return max(error.retry_after, backoff)
    return backoff


def _retryable(error: LLMTransientError) -> bool:
    retry_after = getattr(error, "retry_after", None)
    return retry_after is None or retry_after <= MAX_RETRY_AFTER


def _gave_up(error: LLMTransientError, attempts: int) -> None:
    """Say in the error how many attempts were made (once several were)."""
    if attempts > 1 and "(gave up after" not in error.message:
        error.message = f"{error.message} (gave up after {attempts} attempts)"
        error.args = (error.message,)
    error.attempts = attempts
