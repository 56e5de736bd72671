"""Bedrock's failures as our exception types, at the adapter edge: an HTTP error (its type in
``x-amzn-ErrorType`` or the body), an exception frame of a stream, or the HTTP layer's own
failure. Throttling, 5xx and an unready model are transient; bad or expired credentials, a
missing permission and an unknown model are final at once; "input is too long" is an
overflow. Messages are cleaned of anything credential-shaped (providers echo input)."""

from __future__ import annotations

import re
import socket
import ssl
from collections.abc import Mapping
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
    LLMServerError,
    LLMTimeoutError,
    ToolsNotSupportedError,
)
from app.llm.arguments import loads_safely
from app.llm.failures import final_connect_failure, redacted, retry_after
from app.llm.windows import context_numbers

#: Characters of a body that is not Bedrock's JSON an error message shows.
EXCERPT_CHARS = 300

_CREDENTIALS = {
    "unrecognizedclient",
    "invalidsignature",
    "signaturedoesnotmatch",
    "incompletesignature",
    "expiredtoken",
    "invalidclienttokenid",
    "missingauthenticationtoken",
    "invalidaccesskeyid",
    "unauthorized",
    "notauthorized",
}
_TRANSIENT = {
    "modelnotready",
    "serviceunavailable",
    "internalserver",
    "internalfailure",
    "modelerror",
    "modelstreamerror",
}
_CONTEXT = (
    r"input is too long|prompt is too long|too many (?:input )?tokens|context window|"
    r"context length|maximum context|token count exceeds|exceeds? the maximum[^.]{0,40}tokens"
)
_NO_TOOLS = r"(?:does not|doesn't|do not) support (?:tool|the toolconfig|function)"
_UNKNOWN_MODEL = r"model identifier is invalid|model id .{0,80}(?:not found|invalid)"


def error_type(headers: Mapping[str, str], data: Any) -> str:
    """The exception's name (``ThrottlingException``): ``x-amzn-ErrorType`` first, then the
    body's ``__type`` or ``code`` (``com.amazon...#Name`` and ``Name:url`` forms cut)."""
    raw = headers.get("x-amzn-errortype") or ""
    if not raw and isinstance(data, dict):
        raw = str(data.get("__type") or data.get("code") or data.get("Code") or "")
    return raw.split(":", 1)[0].rsplit("#", 1)[-1].strip()


def error_from_response(
    status: int, body: bytes, headers: Mapping[str, str], *, model: str, endpoint: str
) -> LLMError:
    """Our error for an HTTP error answer (the caller raises it)."""
    try:
        data = loads_safely(body) if body else None
    except ValueError:
        data = None
    text = _message(data) or _excerpt(body) or f"HTTP {status}"
    return classify(
        error_type(headers, data),
        text,
        status,
        model=model,
        endpoint=endpoint,
        retry_after=retry_after(headers),
    )


def stream_exception(kind: str, payload: bytes, *, model: str, endpoint: str) -> LLMError:
    """Our error for a stream's exception frame (``throttlingException``, ...)."""
    try:
        data = loads_safely(payload) if payload else None
    except ValueError:
        data = None
    text = _message(data) or _excerpt(payload) or kind
    name = kind[:1].upper() + kind[1:]
    status = 429 if name.lower().startswith("throttling") else None
    return classify(name, text, status, model=model, endpoint=endpoint, streamed=True)


def classify(
    kind: str,
    text: str,
    status: int | None,
    *,
    model: str,
    endpoint: str,
    retry_after: float | None = None,
    streamed: bool = False,
) -> LLMError:
    """The error for an exception named ``kind`` (its status when it came over HTTP)."""
    name = kind.lower().removesuffix("exception")
    label = f"HTTP {status} {kind}" if status else (kind or "error")
    where = f"Bedrock ({endpoint})"
    kw: dict[str, Any] = {"status_code": status, "model": model}
    said = f"{where} answered model '{model}' with {label}: {text}"
    if name in _CREDENTIALS or (not name and status == 401):
        error: LLMError = LLMAuthenticationError(
            f"{where} refused the AWS credentials for model '{model}' ({label}): {text}. Check "
            "the AWS credentials (environment, AWS_PROFILE / aws_profile, the instance or task "
            "role, AWS_BEARER_TOKEN_BEDROCK) and the clock, which signatures depend on.",
            **kw,
        )
    elif name == "accessdenied" or (not name and status == 403):
        error = LLMAuthenticationError(
            f"{where} denied model '{model}' ({label}): {text}. The credentials need "
            "bedrock:InvokeModel (and bedrock:InvokeModelWithResponseStream) on this model, "
            "and the model must be enabled for the account in this region.",
            **kw,
        )
    elif name in ("throttling", "toomanyrequests") or (not name and status == 429):
        error = LLMRateLimitError(f"Rate limited: {said}", retry_after=retry_after, **kw)
    elif name == "servicequotaexceeded":
        error = LLMQuotaError(f"Quota exceeded: {said}", **kw)
    elif name in ("modeltimeout", "requesttimeout") or (not name and status == 408):
        error = LLMTimeoutError(f"Timed out: {said}", **kw)
    elif (status is None or status < 500) and re.search(_CONTEXT, text, re.IGNORECASE):
        limit, tokens = context_numbers(text)
        error = ContextWindowExceededError(
            f"The request does not fit the context window of model '{model}' ({where}): {text}",
            limit=limit,
            tokens=tokens,
            **kw,
        )
    elif name in _TRANSIENT or (not name and (status or 0) >= 500) or (streamed and not name):
        error = LLMServerError(said, **kw)
    elif (
        name == "resourcenotfound"
        or re.search(_UNKNOWN_MODEL, text, re.IGNORECASE)
        or (not name and status == 404)
    ):
        error = LLMNotFoundError(
            f"{said}. Check the model id (a Bedrock model or inference profile id such as "
            "us.anthropic.claude-3-7-sonnet-20250219-v1:0, available in this region).",
            **kw,
        )
    elif re.search(_NO_TOOLS, text, re.IGNORECASE):
        error = ToolsNotSupportedError(
            f'{said}. Choose a model that supports tool use, or set tool_calling = "text".',
            **kw,
        )
    elif (status or 0) >= 500:
        error = LLMServerError(said, **kw)
    else:
        error = LLMBadRequestError(said, **kw)
    return redacted(error)


def _message(data: Any) -> str | None:
    if isinstance(data, dict):
        for key in ("message", "Message", "errorMessage"):
            if isinstance(value := data.get(key), str) and value.strip():
                return value.strip()
    return None


def _excerpt(body: bytes) -> str:
    text = " ".join(body[: EXCERPT_CHARS * 4].decode("utf-8", "replace").split())
    return text if len(text) <= EXCERPT_CHARS else text[: EXCERPT_CHARS - 3] + "..."


def transport_error(
    error: BaseException, *, model: str, endpoint: str, failure: str, timeout: str
) -> LLMError | None:
    """Our error for a failure of the HTTP layer (None: ``error`` is not one of those). A
    connection that cannot be made for good (nothing listens, unknown host, TLS) is final."""
    import httpx2

    if (cause := final_connect_failure(error)) is not None:
        return redacted(LLMEndpointError(_final(cause, endpoint, model), model=model))
    if isinstance(error, httpx2.TimeoutException):
        return LLMTimeoutError(timeout, model=model)
    if isinstance(error, httpx2.TransportError | OSError):
        return redacted(
            LLMConnectionError(f"{failure}: {type(error).__name__}: {error}", model=model)
        )
    return None


def _final(cause: BaseException, endpoint: str, model: str) -> str:
    """What a final connect failure (:func:`final_connect_failure`) says, with Bedrock's
    advice: the endpoint comes from the region, or the environment."""
    if isinstance(cause, socket.gaierror):
        return (
            f"The host of {endpoint} was not found (DNS: {cause.strerror or cause}) for model "
            f"'{model}': is the region or AWS_ENDPOINT_URL_BEDROCK_RUNTIME right?"
        )
    if isinstance(cause, ssl.SSLError):
        return f"TLS with {endpoint} failed ({cause.reason or cause}) for model '{model}'"
    return f"Nothing listens at {endpoint} (connection refused) for model '{model}'"
