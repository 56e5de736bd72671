"""The anthropic SDK's exceptions as ours, at the adapter edge (the caller raises the result
``from`` the SDK's error). The API names the kind of every error (``error.type``), also for
an ``error`` event in the middle of a stream, so that decides first and the status second:
rate limits, overloads, 5xx, timeouts and dropped connections are transient; an overlong prompt
is a context overflow with its numbers; bad keys, unknown models and other refusals are final.
Texts are redacted: providers echo rejected keys back.
"""

from __future__ import annotations

import re
from typing import Any

from app.exceptions import (
    ContextWindowExceededError,
    LLMAuthenticationError,
    LLMBadRequestError,
    LLMConnectionError,
    LLMError,
    LLMNotFoundError,
    LLMQuotaError,
    LLMRateLimitError,
    LLMResponseError,
    LLMServerError,
    LLMTimeoutError,
)
from app.llm.failures import endpoint_error, redacted, retry_after
from app.llm.windows import context_numbers

#: The API's error types by the status it sends them with (a stream's error event has none).
STATUS_OF_TYPE = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}

# "input length and `max_tokens` exceed context limit: 197450 + 8192 > 200000"
_SUM_OVERFLOW = re.compile(r"exceed context limit:\s*(\d+)\s*\+\s*(\d+)\s*>\s*(\d+)")
_OVERFLOW = re.compile(r"prompt is too long|exceed context limit|context window", re.I)


def translate_error(error: Exception, *, model: str, endpoint: str) -> LLMError:
    """Our error for an exception the SDK (or the stream under it) raised."""
    import anthropic

    where = f" ({endpoint})" if endpoint else ""
    if isinstance(error, anthropic.APITimeoutError):
        return LLMTimeoutError(f"Request to model '{model}'{where} timed out", model=model)
    if isinstance(error, anthropic.APIConnectionError):
        where_to = endpoint.rstrip("/") or "the Anthropic API"
        final = endpoint_error(error, where=where_to, model=model)
        if final is not None:
            return final
        cause = error.__cause__ or error.__context__
        detail = f": {type(cause).__name__}: {cause}" if cause else ""
        return redacted(
            LLMConnectionError(
                f"Could not reach the Anthropic API{where} for model '{model}'{detail}",
                model=model,
            )
        )
    if isinstance(error, anthropic.APIStatusError):
        response = error.response
        status = int(error.status_code)
        return error_from_body(
            status if status >= 400 else None,
            error.body,
            response.headers,
            model=model,
            endpoint=endpoint,
        )
    if isinstance(error, anthropic.APIError):
        return redacted(
            LLMResponseError(f"Unusable response from model '{model}'{where}: {error}", model=model)
        )
    return redacted(LLMError(f"Request to model '{model}'{where} failed: {error}", model=model))


def stream_broken(error: Exception, *, model: str, endpoint: str, events: int) -> LLMError:
    """Our error for the connection failing in the middle of a streamed answer."""
    where = f" ({endpoint})" if endpoint else ""
    kind = LLMTimeoutError if "Timeout" in type(error).__name__ else LLMConnectionError
    return redacted(
        kind(
            f"The stream from model '{model}'{where} broke after {events} event(s): "
            f"{type(error).__name__}: {error}",
            model=model,
        )
    )


def malformed(error: Exception, *, model: str, endpoint: str) -> LLMError:
    """Our error for an answer that is no JSON (retried a bounded number of times)."""
    where = f" ({endpoint})" if endpoint else ""
    return redacted(
        LLMResponseError(f"Unusable response from model '{model}'{where}: {error}", model=model)
    )


def error_from_body(
    status: int | None, body: Any, headers: Any = None, *, model: str, endpoint: str = ""
) -> LLMError:
    """Our error for an error body (``{"type": "error", "error": {"type", "message"}}``) sent
    with HTTP ``status`` (None: an ``error`` event in a stream)."""
    where = f" ({endpoint})" if endpoint else ""
    kind, text = _kind_and_text(body)
    status = STATUS_OF_TYPE.get(kind or "", status) if status is None else status
    code = status or 500
    kw: dict[str, Any] = {"status_code": status, "model": model}
    said = f"HTTP {status}" if status else "an error event in the stream"
    named = f"{kind}, {said}" if kind else said
    if kind == "rate_limit_error" or code == 429:
        return redacted(
            LLMRateLimitError(
                f"Rate limited by the Anthropic API{where} for model '{model}' ({named}): {text}",
                retry_after=retry_after(headers),
                **kw,
            )
        )
    if kind in ("overloaded_error", "api_error", "timeout_error") or code >= 500 or code == 408:
        return redacted(
            LLMServerError(
                f"The Anthropic API{where} failed for model '{model}' ({named}): {text}", **kw
            )
        )
    if kind == "authentication_error" or code == 401 or kind == "permission_error" or code == 403:
        return redacted(
            LLMAuthenticationError(
                f"The Anthropic API{where} refused the credentials for model '{model}' "
                f"({named}): {text}. Check `api_key` in the [llm] profile of your config "
                "(or $ANTHROPIC_API_KEY).",
                **kw,
            )
        )
    if kind == "not_found_error" or code == 404:
        return redacted(
            LLMNotFoundError(
                f"Model or endpoint not found for model '{model}'{where} ({named}): {text}. "
                "Check `model` and `base_url` in your config.",
                **kw,
            )
        )
    if kind == "billing_error" or code == 402 or "credit balance" in text.lower():
        return redacted(LLMQuotaError(f"No credit for model '{model}'{where}: {text}", **kw))
    if _OVERFLOW.search(text):
        limit, tokens = overflow_numbers(text)
        return redacted(
            ContextWindowExceededError(
                f"The request does not fit the context window of model '{model}'{where}: {text}",
                limit=limit,
                tokens=tokens,
                **kw,
            )
        )
    return redacted(
        LLMBadRequestError(f"Model '{model}'{where} rejected the request ({named}): {text}", **kw)
    )


def overflow_numbers(text: str) -> tuple[int | None, int | None]:
    """``(room for the prompt, prompt tokens)`` an overflow message names."""
    match = _SUM_OVERFLOW.search(text)
    if match:  # the prompt fits the window, but not with the answer's max_tokens
        prompt, answer, window = (int(g) for g in match.groups())
        return window - answer, prompt
    return context_numbers(text)


def _kind_and_text(body: Any) -> tuple[str | None, str]:
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        kind, message = error.get("type"), error.get("message")
        return (
            kind if isinstance(kind, str) else None,
            message if isinstance(message, str) and message else str(error)[:500],
        )
    if isinstance(body, str) and body:
        return None, " ".join(body.split())[:500]
    return None, "no error message" if body is None else str(body)[:500]
