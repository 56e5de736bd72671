"""A failure read the same way for every wire model: a failed connection's exception chain
(causes, contexts, the members of a group) and the cause that makes a failed connect final
(nothing listens, an unknown host, TLS), which retrying cannot fix; the advice for an
endpoint at a ``base_url``; the wait a server asks for (``Retry-After``); and error texts
cleaned of credentials. Each wire model maps its API's errors itself; this is what they share."""

from __future__ import annotations

import errno
import math
import socket
import ssl
import time
from collections.abc import Iterator
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar

from app.exceptions import LLMEndpointError, LLMError
from app.logger import redact

_E = TypeVar("_E", bound=LLMError)


def causes(error: BaseException) -> Iterator[BaseException]:
    """``error`` and what it came from (causes, contexts, the members of a group)."""
    seen: set[int] = set()
    pending = [error]
    while pending and len(seen) < 64:
        current = pending.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
        for linked in (current.__cause__, current.__context__):
            if linked is not None:
                pending.append(linked)


def final_connect_failure(error: BaseException) -> BaseException | None:
    """The cause that makes a failed connect final: a refused connection
    (``ConnectionRefusedError``), an unknown host (``socket.gaierror``) or TLS
    (``ssl.SSLError``, a certificate's ``ssl.SSLCertVerificationError`` among them). None
    when ``error`` did not happen while connecting (an HTTP client's ``ConnectError`` in its
    chain): the same errors met while an answer is read are a broken connection, worth
    another try."""
    chain = list(causes(error))
    if not any(type(cause).__name__ == "ConnectError" for cause in chain):
        return None
    for cause in chain:
        refused = isinstance(cause, OSError) and cause.errno == errno.ECONNREFUSED
        if isinstance(cause, ConnectionRefusedError | socket.gaierror | ssl.SSLError) or refused:
            return cause
    return None


def endpoint_error(error: BaseException, *, where: str, model: str) -> LLMEndpointError | None:
    """The final error for a failed connect to an endpoint at a ``base_url`` (``where``: the
    URL, or what to call the endpoint without one) that retrying cannot fix, with what to
    check; None when ``error`` is not one (:func:`final_connect_failure`)."""
    cause = final_connect_failure(error)
    if cause is None:
        return None
    if isinstance(cause, socket.gaierror):
        message = (
            f"The host of {where} was not found (DNS lookup failed: "
            f"{cause.strerror or cause}) for model '{model}': is base_url spelt right, "
            "and is the network up?"
        )
    elif isinstance(cause, ssl.SSLCertVerificationError):
        message = (
            f"TLS with {where} failed (certificate: "
            f"{cause.verify_message or cause.reason or cause}) for model '{model}': is "
            "base_url's host the one the certificate names, or does the server need a CA "
            "of its own (SSL_CERT_FILE)?"
        )
    elif isinstance(cause, ssl.SSLError):
        message = (
            f"TLS with {where} failed ({cause.reason or cause}) for model '{model}': is "
            "it an https server? A local server usually wants http://, not https://"
        )
    else:
        message = (
            f"Nothing listens at {where} (connection refused) for model '{model}': "
            "is the server running, and is base_url right?"
        )
    return redacted(LLMEndpointError(message, model=model))


def retry_after(headers: Any) -> float | None:
    """Seconds the server asks us to wait: ``retry-after-ms``, else ``retry-after`` (seconds
    or an HTTP date). None when it says nothing usable: no header, no finite number (a
    hostile ``nan`` or ``inf`` would stall or stop the retries), a date that does not parse."""
    if headers is None:
        return None
    for key, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(key)
        if not value:
            continue
        try:
            seconds = float(value) / scale
        except ValueError:
            continue
        if math.isfinite(seconds):
            return max(seconds, 0.0)
    value = headers.get("retry-after")
    if not value:
        return None
    try:  # an HTTP date
        return max(parsedate_to_datetime(value).timestamp() - time.time(), 0.0)
    except (TypeError, ValueError):
        return None


def redacted(error: _E) -> _E:
    """``error`` with anything credential-shaped taken out of its message: providers echo
    rejected keys back ("Incorrect API key provided: sk-..."), and the message ends up in
    run results and on screens."""
    clean = redact(error.message)
    if clean != error.message:
        error.message = clean
        error.args = (clean,)
    return error
