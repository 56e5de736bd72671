"""Retrying ``LLMTransientError`` (429, 5xx, timeouts, dropped connections, malformed replies
a bounded number of times) on tenacity; what retrying cannot fix fails at once (docs/llm.md)."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type

from app.exceptions import LLMError, LLMRateLimitError, LLMResponseError, LLMTransientError
from app.llm.model import Model, ModelParams, ModelResponse
from app.llm.openai.streaming import DeltaRelay
from app.llm.openai.transport import deliver
from app.logger import logger
from app.schema import Message

if TYPE_CHECKING:
    from app.config import LLMSettings

T = TypeVar("T")

#: A Retry-After longer than this (seconds) is not waited for: the error goes to the caller.
MAX_RETRY_AFTER = 300.0
#: Malformed replies are asked again at most this many times (a hostile or broken model
#: would otherwise burn the whole retry budget on garbage).
MAX_RESPONSE_RETRIES = 2


async def with_retries(
    attempt: Callable[[], Awaitable[T]],
    *,
    max_retries: int,
    settings: LLMSettings,
    give_up: Callable[[LLMTransientError], bool] | None = None,
) -> T:
    """Run ``attempt`` again on transient failures, at most ``max_retries`` times (malformed
    replies at most ``MAX_RESPONSE_RETRIES`` times, never past a Retry-After over
    ``MAX_RETRY_AFTER``, never once ``give_up(error)`` says so), waiting as
    :func:`retry_delay` says. The error that ends the loop says how many attempts were made.

    The first attempt runs outside tenacity (nearly every request succeeds at once, and a
    step should not pay for a retry loop); its failure is replayed as tenacity's first attempt.
    """
    try:
        return await attempt()
    except LLMTransientError as error:
        first: list[LLMTransientError] = [error]
    malformed = 0

    async def replayed() -> T:
        if first:
            raise first.pop()
        return await attempt()

    def stop(state: RetryCallState) -> bool:
        error = _error_of(state)
        retry_after = getattr(error, "retry_after", None)
        if state.attempt_number > max_retries or (retry_after or 0) > MAX_RETRY_AFTER:
            return True
        if give_up is not None and give_up(error):
            return True
        return isinstance(error, LLMResponseError) and malformed >= MAX_RESPONSE_RETRIES

    def before_sleep(state: RetryCallState) -> None:
        nonlocal malformed
        error = _error_of(state)
        malformed += isinstance(error, LLMResponseError)
        delay = state.next_action.sleep if state.next_action is not None else 0.0
        logger.warning(
            f"LLM request failed ({error}); retry {state.attempt_number}/{max_retries} "
            f"in {delay:.2f}s"
        )

    retrying = AsyncRetrying(
        retry=retry_if_exception_type(LLMTransientError),
        stop=stop,
        wait=lambda state: retry_delay(settings, state.attempt_number, _error_of(state)),
        before_sleep=before_sleep,
        reraise=True,
    )
    try:
        return await retrying(replayed)
    except LLMTransientError as error:
        attempts = int(retrying.statistics.get("attempt_number", 1))
        if attempts > 1 and "(gave up after" not in error.message:
            error.message = f"{error.message} (gave up after {attempts} attempts)"
            error.args = (error.message,)
        error.attempts = attempts
        raise


class Retrying:
    """Wraps ``inner``: transient failures retried as ``settings`` say (:func:`with_retries`);
    text a failed attempt already streamed to ``on_delta`` is not streamed again."""

    def __init__(self, inner: Model, settings: LLMSettings) -> None:
        self.inner = inner
        self.name = inner.name
        self.settings = settings

    async def request(self, messages: Sequence[Message], params: ModelParams) -> ModelResponse:
        relay = DeltaRelay(params.on_delta) if params.on_delta is not None else None
        if relay is not None:

            async def on_delta(piece: str) -> None:
                await deliver(relay.target, relay.new_text(piece))

            params = dataclasses.replace(params, on_delta=on_delta)

        async def attempt() -> ModelResponse:
            if relay is not None:
                relay.attempt()
            return await self.inner.request(messages, params)

        return await with_retries(
            attempt, max_retries=self.settings.max_retries, settings=self.settings
        )


def retry_delay(settings: LLMSettings, number: int, error: LLMError) -> float:
    """Seconds to wait before retry ``number`` (1-based) after ``error``."""
    backoff = min(settings.retry_max_wait, settings.retry_min_wait * 2 ** (number - 1))
    backoff += random.uniform(0, settings.retry_min_wait)
    if isinstance(error, LLMRateLimitError) and error.retry_after is not None:
        return max(error.retry_after, backoff)
    return backoff


def _error_of(state: RetryCallState) -> LLMTransientError:
    error: Any = state.outcome.exception() if state.outcome is not None else None
    assert isinstance(error, LLMTransientError)  # only these are retried (retry=)
    return error
