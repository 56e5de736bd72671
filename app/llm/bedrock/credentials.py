"""How a Bedrock request proves who sends it: a Bedrock API key (``AWS_BEARER_TOKEN_BEDROCK``,
sent as ``Authorization: Bearer``), else a SigV4 signature (signing name ``bedrock``) with
credentials from the standard AWS chain: environment, shared credentials and config files
(``AWS_PROFILE`` or ``aws_profile``), SSO, web identity, ``credential_process``, the container
endpoint and the instance role, so an IAM role needs no key in the config.

The chain is botocore's, resolved off the event loop (:mod:`.offloop`), shared by concurrent
requests, kept, and refreshed in the background before temporary credentials expire. The
secret key, the session token and the API key are registered with the log redactor.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from dataclasses import dataclass
from typing import Any

from app.exceptions import LLMAuthenticationError, LLMConnectionError
from app.llm.bedrock.offloop import start_in_thread
from app.logger import redact, register_secret

#: A Bedrock API key in the environment (what botocore reads for the signing name bedrock).
BEARER_VARIABLE = "AWS_BEARER_TOKEN_BEDROCK"
#: The SigV4 signing name of bedrock-runtime.
SIGNING_NAME = "bedrock"
#: Temporary credentials closer than this to their expiry are waited for, not used.
_EXPIRY_MARGIN = 60
#: Seconds before a failed background refresh is tried again (not once per request).
_RETRY_REFRESH = 10.0

_CHAIN_ADVICE = (
    "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary "
    "keys), name a profile of ~/.aws/credentials or ~/.aws/config (aws_profile in the [llm] "
    "profile, or AWS_PROFILE), run where an IAM role is attached (ECS, EKS, EC2), or set "
    f"{BEARER_VARIABLE} to a Bedrock API key"
)


@dataclass(frozen=True, slots=True)
class _Resolved:
    credentials: Any  # botocore's Credentials (refreshable or not)
    frozen: Any  # botocore's ReadOnlyCredentials: one consistent key, secret and token


class AwsAuth:
    """Signs requests for one region and profile. The environment is read as botocore reads
    it; the API key on every request (a rotated key is used at once)."""

    def __init__(self, region: str, profile: str | None) -> None:
        self.region = region
        self.profile = profile
        self._lock = threading.Lock()
        self._state: _Resolved | None = None
        self._pending: asyncio.Future[_Resolved] | None = None
        self._failed_at = -_RETRY_REFRESH  # when a background refresh last failed

    def bearer_token(self) -> str | None:
        token = os.environ.get(BEARER_VARIABLE, "").strip()
        return token or None

    @property
    def method(self) -> str | None:
        """Where the credentials came from (``env``, ``shared-credentials-file``,
        ``container-role``, ``iam-role``...), once resolved; ``bearer`` for an API key."""
        if self.bearer_token():
            return "bearer"
        state = self._state
        return None if state is None else str(state.credentials.method)

    async def headers(
        self, url: str, body: bytes, base: dict[str, str], wait: float
    ) -> dict[str, str]:
        """``base`` with the authentication headers for a POST of ``body`` to ``url``;
        resolving credentials waits at most ``wait`` seconds."""
        token = self.bearer_token()
        if token is not None:
            register_secret(token)
            if not token.isascii() or not token.isprintable() or " " in token:
                raise LLMAuthenticationError(
                    f"{BEARER_VARIABLE} holds characters no API key has (spaces, control "
                    "or non-ASCII characters): set it to the key alone"
                )
            return {**base, "Authorization": f"Bearer {token}"}
        state = await self._credentials(wait)
        from botocore.auth import SigV4Auth  # imported by the resolution, off the loop
        from botocore.awsrequest import AWSRequest

        request = AWSRequest(method="POST", url=url, data=body, headers=base)
        SigV4Auth(state.frozen, SIGNING_NAME, self.region).add_auth(request)
        return dict(request.headers.items())

    async def _credentials(self, wait: float) -> _Resolved:
        state = self._state
        if state is not None and not _refresh_needed(state.credentials):
            return state
        if state is not None and not _refresh_needed(state.credentials, _EXPIRY_MARGIN):
            # Good for a while yet: refreshed in the background (not again right after a
            # failed refresh, or every request would start one).
            if time.monotonic() - self._failed_at >= _RETRY_REFRESH:
                self._resolving()
            return state
        try:
            return await asyncio.wait_for(asyncio.shield(self._resolving()), wait)
        except TimeoutError as e:
            raise LLMConnectionError(
                f"Resolving AWS credentials for Bedrock took more than {wait:g} s (a slow "
                "instance-metadata or container endpoint, SSO or credential_process?)"
            ) from e

    def _resolving(self) -> asyncio.Future[_Resolved]:
        """The resolution under way on this loop, else a new one."""
        pending = self._pending
        if (
            pending is None
            or pending.done()
            or pending.get_loop() is not asyncio.get_running_loop()
        ):
            pending = self._pending = start_in_thread(self._resolve, name="bedrock-credentials")
            pending.add_done_callback(self._note_failure)
        return pending

    def _note_failure(self, done: asyncio.Future[_Resolved]) -> None:
        if not done.cancelled() and done.exception() is not None:
            self._failed_at = time.monotonic()

    def _resolve(self) -> _Resolved:
        """The credentials, frozen once (refreshed when temporary ones are due); blocking."""
        try:
            from botocore import exceptions
        except ImportError as e:  # checked when the model was built; uninstalled since?
            raise LLMAuthenticationError(f"Bedrock needs botocore: {e}") from e
        with self._lock:
            state = self._state
        try:
            credentials = state.credentials if state is not None else self._chain()
            frozen = credentials.get_frozen_credentials()
        except exceptions.ProfileNotFound as e:
            raise LLMAuthenticationError(
                f"The AWS profile {self.profile or os.environ.get('AWS_PROFILE')!r} is not in "
                f"the AWS config or credentials file ({e}): fix aws_profile or AWS_PROFILE"
            ) from e
        except (exceptions.BotoCoreError, OSError, ValueError) as e:
            raise LLMAuthenticationError(
                redact(
                    f"Could not get AWS credentials for Bedrock ({type(e).__name__}: {e}); "
                    f"{_CHAIN_ADVICE}"
                )
            ) from e
        if not frozen.access_key or not frozen.secret_key:
            raise LLMAuthenticationError(
                f"The AWS credentials found are incomplete: {_CHAIN_ADVICE}"
            )
        register_secret(frozen.secret_key)
        register_secret(frozen.token)
        resolved = _Resolved(credentials, frozen)
        with self._lock:
            self._state = resolved
        return resolved

    def _chain(self) -> Any:
        import botocore.auth
        import botocore.session

        register_secret(os.environ.get("AWS_CONTAINER_AUTHORIZATION_TOKEN"))  # the role's key
        session = botocore.session.Session(profile=self.profile)
        credentials = session.get_credentials()
        if credentials is None:
            raise LLMAuthenticationError(f"No AWS credentials found for Bedrock: {_CHAIN_ADVICE}")
        return credentials


def _refresh_needed(credentials: Any, within: int | None = None) -> bool:
    """Whether temporary credentials are due for a refresh (within ``within`` seconds of their
    expiry; None: botocore's advisory window). Long-term keys never are."""
    check = getattr(credentials, "refresh_needed", None)
    return bool(check(within)) if check is not None else False
