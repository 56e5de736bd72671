"""Our exception types from an endpoint's failure, at the adapter edge: from status, body and
headers (:func:`error_from_response`) or from the SDK's exceptions (:func:`translate_error`).
What retrying cannot fix (refused connection, unknown host, TLS, 401/403/404) is final."""

from __future__ import annotations

import html
import re
from typing import Any

from app.exceptions import (
    ContextWindowExceededError,
    LLMAuthenticationError,
    LLMBadRequestError,
    LLMConnectionError,
    LLMEndpointError,
    LLMError,
    LLMNotFoundError,
    LLMQuotaError,
    LLMRateLimitError,
    LLMResponseError,
    LLMServerError,
    LLMTimeoutError,
    ToolsNotSupportedError,
)
from app.llm.arguments import loads_safely
from app.llm.failures import endpoint_error as connect_error
from app.llm.failures import redacted, retry_after
from app.llm.windows import context_numbers

#: Characters of a non-JSON body (tags stripped) an error message shows.
EXCERPT_CHARS = 200

# Patterns as text, matched with ``re.search`` (compiled on the first error, then cached by
# ``re``): most processes never see an error, and compiling them costs every process.
_CONTEXT_PATTERNS = (
    r"context[_ ]length|maximum context|context window|context size|too many tokens|"
    r"prompt is too long|input is too long|reduce the length|exceed_context"
)
_TOOLS_PATTERNS = (
    r"(does not|doesn't|do not|not) support[s]? (tools|tool[ _]use|tool[ _]calling|function)|"
    r"(tools?|function[ _]calling|tool_choice)\b[^.]{0,40}\b"
    r"not (supported|support|enabled|allowed)|"
    # vLLM started without --enable-auto-tool-choice
    r"tool[ _]choice requires --enable-auto-tool-choice"
)

#: A request field refused by the server's validation (pydantic's words), whatever the status.
_VALIDATION_PATTERNS = (
    r"\bvalidation errors? *(for|:|\n)|Input should be |Extra inputs are not permitted"
)


def error_from_response(
    status: int, body: bytes | str | Any, headers: Any = None, *, model: str, base_url: str = ""
) -> LLMError:
    """Our error for an HTTP error response (status >= 400); the caller raises it."""
    where = f" ({base_url})" if base_url else ""
    data: Any = body
    if isinstance(body, bytes | str):
        try:
            data = loads_safely(body)
        except ValueError:
            data = body_excerpt(body) or f"HTTP {status}"
    text, code = _error_text(data, status)
    return redacted(_from_status(status, text, code, data, headers, model=model, where=where))


def _error_text(data: Any, status: int) -> tuple[str, str | None]:
    message: Any = None
    code: Any = None
    if isinstance(data, dict):
        inner = data.get("error", data)
        if isinstance(inner, dict):
            message = inner.get("message") or inner.get("detail")
            code = inner.get("code") or inner.get("type")
        elif isinstance(inner, str):
            message = inner
        if message is None and isinstance(data.get("detail"), str):
            message = data["detail"]
    elif isinstance(data, str):
        message = data
    if not isinstance(message, str) or not message:
        message = str(data)[:500] if data else f"HTTP {status}"
    return message, code if isinstance(code, str) else None


def _from_status(
    status: int, text: str, code: str | None, data: Any, headers: Any, *, model: str, where: str
) -> LLMError:
    kw: dict[str, Any] = {"status_code": status, "model": model}
    if status in (401, 403):
        return LLMAuthenticationError(
            f"The LLM endpoint{where} refused the credentials for model '{model}' "
            f"(HTTP {status}): {text}. "
            "Check `api_key` in the [llm] section of your config (or $OPENAI_API_KEY).",
            **kw,
        )
    if status == 429:
        if code == "insufficient_quota" or "quota" in text.lower():
            return LLMQuotaError(f"Quota exhausted for model '{model}'{where}: {text}", **kw)
        return LLMRateLimitError(
            f"Rate limited by the LLM endpoint{where} for model '{model}' (HTTP 429): {text}",
            retry_after=retry_after(headers),
            **kw,
        )
    if code in ("context_length_exceeded", "exceed_context_size_error") or (
        status < 500 and re.search(_CONTEXT_PATTERNS, text, re.IGNORECASE)
    ):
        limit, tokens = context_numbers(text, data)
        return ContextWindowExceededError(
            f"The request does not fit the context window of model '{model}'{where}: {text}",
            limit=limit,
            tokens=tokens,
            **kw,
        )
    if status >= 500 and re.search(_VALIDATION_PATTERNS, text, re.IGNORECASE):
        # A request its validation refused, answered as a server fault (llama-cpp-python's
        # HTTP 500 for a response_format it does not know): asking again changes nothing.
        return LLMBadRequestError(
            f"Model '{model}'{where} rejected the request (HTTP {status}): {text}", **kw
        )
    if status >= 500 or status in (408, 409):
        return LLMServerError(
            f"The LLM endpoint{where} failed for model '{model}' (HTTP {status}): {text}", **kw
        )
    if re.search(_TOOLS_PATTERNS, text, re.IGNORECASE):
        return ToolsNotSupportedError(
            f"Model '{model}'{where} rejected the tools in the request: {text}. "
            'Choose a model that supports function calling, or set tool_calling = "text".',
            **kw,
        )
    if status == 404:
        return LLMNotFoundError(
            f"Model or endpoint not found (HTTP 404) for model '{model}'{where}: {text}. "
            "Check `model` and `base_url` in your config.",
            **kw,
        )
    return LLMBadRequestError(
        f"Model '{model}'{where} rejected the request (HTTP {status}): {text}", **kw
    )


def translate_error(error: Exception, *, model: str, base_url: str = "") -> LLMError:
    """Map an openai SDK exception to our type (SDK transport only; the caller raises it
    ``from error``). Status errors go through :func:`error_from_response`."""
    import openai

    where = f" ({base_url})" if base_url else ""
    if isinstance(error, openai.APITimeoutError):
        return LLMTimeoutError(f"Request to model '{model}'{where} timed out", model=model)
    if isinstance(error, openai.APIConnectionError):
        final = endpoint_error(error, endpoint=base_url, model=model)
        if final is not None:
            return final
        cause = error.__cause__ or error.__context__
        detail = f": {cause}" if cause else ""
        return redacted(
            LLMConnectionError(
                f"Could not reach the LLM endpoint{where} for model '{model}'{detail}", model=model
            )
        )
    if isinstance(error, openai.APIStatusError):
        response = error.response
        body = error.body if error.body is not None else getattr(response, "text", "")
        if isinstance(body, dict) and "error" not in body and "message" in body:
            body = {"error": body}
        return error_from_response(
            int(error.status_code), body, response.headers, model=model, base_url=base_url
        )
    if isinstance(error, openai.APIResponseValidationError | openai.APIError):
        return redacted(
            LLMResponseError(f"Unusable response from model '{model}'{where}: {error}", model=model)
        )
    return redacted(
        LLMError(f"LLM request failed for model '{model}'{where}: {error}", model=model)
    )


def body_excerpt(body: bytes | str, limit: int = EXCERPT_CHARS) -> str:
    """A one-line excerpt of a body that is not JSON (an HTML page as its ``<title>``, else its
    text without tags), at most ``limit`` characters."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body)
    head = text[:65536]
    if re.match(r"\s*<", head):
        title = re.search(r"<title[^>]*>(.*?)</title", head, re.IGNORECASE | re.DOTALL)
        if title and title.group(1).strip():
            name = " ".join(html.unescape(title.group(1)).split())
            return f"an HTML page titled {_cut(name, limit)!r}"
        head = re.sub(r"(?is)<(script|style)\b.*?</\1\s*>", " ", head)
        words = " ".join(html.unescape(re.sub(r"<[^>]*>", " ", head)).split())
        return f"an HTML page: {_cut(words, limit)!r}" if words else "an empty HTML page"
    return _cut(" ".join(head.split()), limit)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def endpoint_error(error: BaseException, *, endpoint: str, model: str) -> LLMEndpointError | None:
    """The final error for a failed connect that retrying cannot fix (nothing listens,
    unknown host, TLS), else None; the same errors mid-answer are worth another try."""
    return connect_error(error, where=endpoint.rstrip("/") or "the LLM endpoint", model=model)
