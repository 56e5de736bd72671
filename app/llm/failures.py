"""A failed connection read from its exception chain, for every wire model: the chain itself
(causes, contexts, the members of a group) and the cause that makes a failed connect final
(nothing listens, an unknown host, TLS), which retrying cannot fix. Each wire model words
its own advice; the reading is here once."""

from __future__ import annotations

import errno
import socket
import ssl
from collections.abc import Iterator


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
