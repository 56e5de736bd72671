"""Translation of openai SDK errors into our exception tree, at the adapter edge."""

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
    ToolsNotSupportedError,
)
from app.logger import redact

__all__ = ["parse_retry_after", "translate_error"]

_CONTEXT_PATTERNS = re.compile(
    r"context[_ ]length|maximum context|context window|too many tokens|prompt is too long|"
    r"input is too long|reduce the length",
    re.IGNORECASE,
)
_TOOLS_PATTERNS = re.compile(
    r"(does not|doesn't|do not|not) support[s]? (tools|tool[ _]use|tool[ _]calling|function)|"
    r"(tools?|function[ _]calling|tool_choice)\b[^.]{0,40}\b"
    r"not (supported|support|enabled|allowed)",
    re.IGNORECASE,
)


def translate_error(error: Exception, *, model: str, base_url: str = "") -> LLMError:
    """Map an openai SDK exception to our type; the caller raises it ``from error``.

    Providers echo rejected keys back ("Incorrect API key provided: sk-..."), so the message
    is cleaned of anything credential-shaped: it ends up in run results and on screens.
    """
    translated = _translate(error, model=model, base_url=base_url)
    clean = redact(translated.message)
    if clean != translated.message:
        translated.message = clean
        translated.args = (clean,)
    return translated


def _translate(error: Exception, *, model: str, base_url: str) -> LLMError:
    import openai

    where = f" ({base_url})" if base_url else ""
    if isinstance(error, openai.APITimeoutError):
        return LLMTimeoutError(f"Request to model '{model}'{where} timed out", model=model)
    if isinstance(error, openai.APIConnectionError):
        cause = error.__cause__ or error.__context__
        detail = f": {cause}" if cause else ""
        return LLMConnectionError(
            f"Could not reach the LLM endpoint{where} for model '{model}'{detail}", model=model
        )
    if isinstance(error, openai.APIStatusError):
        return _from_status(error, model=model, where=where)
    if isinstance(error, openai.APIResponseValidationError | openai.APIError):
        return LLMResponseError(f"Unusable response from model '{model}'{where}: {error}",
                                model=model)
    return LLMError(f"LLM request failed for model '{model}'{where}: {error}", model=model)


def _from_status(error: Any, *, model: str, where: str) -> LLMError:
    status = int(error.status_code)
    text, code = _error_text(error)
    kw = {"status_code": status, "model": model}
    if status in (401, 403):
        return LLMAuthenticationError(
            f"The LLM endpoint{where} refused the credentials (HTTP {status}): {text}. "
            "Check `api_key` in the [llm] section of your config (or $OPENAI_API_KEY).",
            **kw,
        )
    if status == 429:
        if code == "insufficient_quota" or "quota" in text.lower():
            return LLMQuotaError(f"Quota exhausted for model '{model}'{where}: {text}", **kw)
        return LLMRateLimitError(
            f"Rate limited by the LLM endpoint{where} (HTTP 429): {text}",
            retry_after=parse_retry_after(error.response.headers),
            **kw,
        )
    if status >= 500 or status in (408, 409):
        return LLMServerError(f"The LLM endpoint{where} failed (HTTP {status}): {text}", **kw)
    if code == "context_length_exceeded" or _CONTEXT_PATTERNS.search(text):
        return ContextWindowExceededError(
            f"The request does not fit the context window of model '{model}': {text}", **kw
        )
    if _TOOLS_PATTERNS.search(text):
        return ToolsNotSupportedError(
            f"Model '{model}'{where} rejected the tools in the request: {text}. "
            "Choose a model that supports function calling.",
            **kw,
        )
    if status == 404:
        return LLMNotFoundError(
            f"Model or endpoint not found (HTTP 404) for model '{model}'{where}: {text}. "
            "Check `model` and `base_url` in your config.",
            **kw,
        )
    return LLMBadRequestError(f"Model '{model}'{where} rejected the request (HTTP {status}): "
                              f"{text}", **kw)


def _error_text(error: Any) -> tuple[str, str | None]:
    body = getattr(error, "body", None)
    message, code = None, getattr(error, "code", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            message = inner.get("message")
            code = code or inner.get("code") or inner.get("type")
        elif isinstance(inner, str):
            message = inner
    return str(message or getattr(error, "message", "") or error), code


def parse_retry_after(headers: Any) -> float | None:
    """Seconds the server asks us to wait (``retry-after-ms`` or ``retry-after``), if any."""
    if headers is None:
        return None
    value = headers.get("retry-after-ms")
    if value:
        try:
            return max(float(value) / 1000.0, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    from email.utils import parsedate_to_datetime

    try:
        import time

        return max(parsedate_to_datetime(value).timestamp() - time.time(), 0.0)
    except (TypeError, ValueError):
        return None
