"""``Retrying``: the one retry path, around every model. ``LLMTransientError`` (429, 5xx,
timeouts, dropped connections, malformed replies a bounded number of times) is retried on
tenacity; what retrying cannot fix fails at once (docs/llm.md).

The attempts of one request share an :class:`~app.llm.model.Attempt` (``params.attempt``):
a wire model keeps there what one attempt teaches the next, and may make an error the last.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from app.exceptions import LLMError, LLMRateLimitError, LLMResponseError, LLMTransientError
from app.llm.deltas import DeltaRelay
from app.llm.model import Attempt, Model, ModelParams, ModelResponse
from app.logger import logger
from app.schema import Message

if TYPE_CHECKING:
    from tenacity import RetryCallState

    from app.config import LLMSettings

#: A Retry-After longer than this (seconds) is not waited for: the error goes to the caller.
MAX_RETRY_AFTER = 300.0
#: Malformed replies are asked again at most this many times (a hostile or broken model
#: would otherwise burn the whole retry budget on garbage).
MAX_RESPONSE_RETRIES = 2


class Retrying:
    """Wraps ``inner``: transient failures retried as ``settings`` say (``max_retries``,
    backoff between ``retry_min_wait`` and ``retry_max_wait``, a server's Retry-After); text
    a failed attempt already streamed to ``on_delta`` is not streamed again. The error that
    ends the loop says how many attempts were made."""

    def __init__(self, inner: Model, settings: LLMSettings) -> None:
        self.inner = inner
        self.name = inner.name
        self.settings = settings

    async def request(self, messages: Sequence[Message], params: ModelParams) -> ModelResponse:
        attempt = Attempt()
        relay = DeltaRelay(params.on_delta) if params.on_delta is not None else None
        params = ModelParams(  # not dataclasses.replace: this runs at every step
            params.tools,
            params.tool_choice,
            params.max_tokens,
            params.temperature,
            params.timeout,
            relay.pass_on if relay is not None else None,
            params.stream,
            params.extra,
            attempt,
        )
        inner = self.inner
        # The first attempt runs outside tenacity (nearly every request succeeds at once, and
        # a step should not pay for a retry loop); its failure is replayed as tenacity's first.
        try:
            return await inner.request(messages, params)
        except LLMTransientError as error:
            first: list[LLMTransientError] = [error]

        async def again() -> ModelResponse:
            if first:
                raise first.pop()
            attempt.number += 1
            if relay is not None:
                relay.attempt()
            return await inner.request(messages, params)

        return await self._retried(again, attempt)

    async def _retried(self, again: Any, attempt: Attempt) -> ModelResponse:
        # tenacity is imported on the first failure: ~10 ms of every start-up otherwise, for
        # a loop most runs never enter.
        from tenacity import AsyncRetrying, retry_if_exception_type

        settings, max_retries = self.settings, self.settings.max_retries
        malformed = 0

        def stop(state: RetryCallState) -> bool:
            error = _error_of(state)
            retry_after = getattr(error, "retry_after", None)
            if state.attempt_number > max_retries or (retry_after or 0) > MAX_RETRY_AFTER:
                return True
            if attempt.final:
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
            response: ModelResponse = await retrying(again)
        except LLMTransientError as error:
            attempts = attempt.number
            if attempts > 1 and "(gave up after" not in error.message:
                error.message = f"{error.message} (gave up after {attempts} attempts)"
                error.args = (error.message,)
            error.attempts = attempts
            raise
        return response


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
