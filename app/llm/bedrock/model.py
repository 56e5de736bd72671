"""``BedrockModel``: Amazon Bedrock's Converse API as a :class:`~app.llm.Model` (upstream's
``api_type = "aws"``).

A turn is one Converse request, or one ConverseStream request when its text is watched
(``on_delta``) or a stream is asked for (``ModelParams.stream``, the profile's ``stream``):
a plain answer is cheaper to read and cannot be cut mid-way, a stream shows the text as it
is written. One attempt per
request: retrying is the ``Retrying`` wrapper's, the one retry path. The request is signed
with SigV4 (or a Bedrock API key) by :mod:`.credentials` and sent with httpx2; botocore
provides the credential chain, the signer and the event-stream parser, never the transport.
Nothing here blocks the event loop: imports and credentials are resolved off it.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import sys
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

from app.exceptions import ConfigError, LLMError, LLMResponseError
from app.install_hint import pip_install
from app.llm.arguments import loads_safely
from app.llm.bedrock.converse import converse_request, encode
from app.llm.bedrock.credentials import AwsAuth
from app.llm.bedrock.endpoint import Endpoint, checked_region, missing_region, resolve_endpoint
from app.llm.bedrock.errors import error_from_response, stream_exception, transport_error
from app.llm.bedrock.events import CONTENT_TYPE, FrameReader
from app.llm.bedrock.http import HttpClients
from app.llm.bedrock.offloop import start_in_thread
from app.llm.bedrock.reply import StreamAssembler, parse_converse
from app.llm.deltas import deliver
from app.llm.model import DeltaCallback, ModelParams, ModelResponse
from app.logger import logger
from app.schema import Message

#: Bytes of an error answer that are read (Bedrock's are a short JSON object).
ERROR_BODY_LIMIT = 64 * 1024
#: Characters a model id may keep in the URL path (botocore's label encoding).
_SAFE = "-._~"


class BedrockModel:
    """One Bedrock model (``name``: a model or inference-profile id, or an ARN) at one
    endpoint and region. Build it from a profile with :meth:`from_settings`."""

    def __init__(
        self,
        model_id: str,
        endpoint: Endpoint,
        *,
        timeout: float = 300.0,
        max_connections: int = 100,
        thinking_budget: int | None = None,
        prompt_cache: bool = True,
        stream: bool | str = "auto",
    ) -> None:
        if endpoint.region is None:
            raise missing_region()
        self.name = model_id
        self.region = endpoint.region
        self.profile = endpoint.profile
        self.endpoint = endpoint.base
        self.timeout = timeout
        self.thinking_budget = thinking_budget
        #: The profile's ``stream``: true always, false never, "auto" when the text is watched.
        self.stream = stream
        #: Whether requests carry cache points: asked for, and a model Bedrock caches for.
        self.prompt_cache = prompt_cache and caches_prompts(model_id)
        self.auth = AwsAuth(endpoint.region, endpoint.profile)
        self.http = HttpClients(max_connections)
        self._path = f"{self.endpoint}/model/{urllib.parse.quote(model_id, safe=_SAFE)}"
        self._warm: asyncio.Future[None] | None = None
        self._warned: set[str] = set()

    @classmethod
    def from_settings(cls, settings: Any) -> BedrockModel:
        """The model of an ``api_type = "aws"`` profile: ``model``, ``base_url`` (a host such as
        ``bedrock-runtime.us-west-2.amazonaws.com``, or a URL), ``timeout``,
        ``max_concurrent_requests``, and ``aws_region`` / ``aws_profile`` where the settings
        have them; the environment as the AWS SDKs read it (see docs/bedrock.md)."""
        env = os.environ
        if importlib.util.find_spec("botocore") is None:
            raise ConfigError(
                f"api_type 'aws' (Bedrock) needs the bedrock extra: {pip_install('bedrock')}"
            )
        endpoint = resolve_endpoint(settings, env)
        if endpoint.region is None:
            region = _profile_region(endpoint.profile, env)
            if region is None:
                raise missing_region()
            endpoint = endpoint.with_region(region)
        return cls(
            str(settings.model),
            endpoint,
            timeout=float(getattr(settings, "timeout", 300.0)),
            max_connections=int(getattr(settings, "max_concurrent_requests", 100)),
            thinking_budget=getattr(settings, "thinking_budget", None),
            prompt_cache=bool(getattr(settings, "prompt_cache", True)),
            stream=getattr(settings, "stream", "auto"),
        )

    def __repr__(self) -> str:
        return f"BedrockModel({self.name!r}, region={self.region!r}, endpoint={self.endpoint!r})"

    async def request(self, messages: Sequence[Message], params: ModelParams) -> ModelResponse:
        timeout = params.timeout or self.timeout
        await self._ready()
        stream = params.stream
        if stream is None:
            stream = self.stream if isinstance(self.stream, bool) else params.on_delta is not None
        converse = converse_request(
            messages,
            params,
            model=self.name,
            thinking_budget=self.thinking_budget,
            cache=self.prompt_cache,
        )
        self._warn_ignored(converse.ignored)
        body = encode(converse.body)
        url = f"{self._path}/{'converse-stream' if stream else 'converse'}"
        accept = CONTENT_TYPE if stream else "application/json"
        base = {"Content-Type": "application/json", "Accept": accept}
        headers = await self.auth.headers(url, body, base, timeout)
        response = await self._exchange(
            url, body, headers, timeout, params.on_delta if stream else None
        )
        if params.on_delta is not None and not stream:
            await deliver(params.on_delta, response.message.content)
        if response.finish_reason == "length" and not response.message.tool_calls:
            logger.warning(f"The answer of model '{self.name}' was cut at its token limit")
        return response

    async def _exchange(
        self,
        url: str,
        body: bytes,
        headers: dict[str, str],
        timeout: float,
        on_delta: DeltaCallback | None,
    ) -> ModelResponse:
        client = self.http.client()
        progress: StreamAssembler | None = None
        try:
            async with client.stream(
                "POST", url, content=body, headers=headers, timeout=self.http.timeout(timeout)
            ) as reply:
                if reply.status_code >= 400:
                    raw = await _head(reply, ERROR_BODY_LIMIT)
                    raise error_from_response(
                        reply.status_code,
                        raw,
                        reply.headers,
                        model=self.name,
                        endpoint=self.endpoint,
                    )
                if CONTENT_TYPE in reply.headers.get("content-type", ""):
                    progress = StreamAssembler(self.name)
                    return await self._read_stream(reply, progress, on_delta)
                raw = await reply.aread()  # a plain answer (also to a stream asked for)
        except LLMError:
            raise
        except Exception as e:
            events = progress.events if progress is not None else 0
            error = transport_error(
                e,
                model=self.name,
                endpoint=self.endpoint,
                failure=f"The connection to model '{self.name}' ({self.endpoint}) broke"
                + (f" mid-stream after {events} event(s)" if progress is not None else ""),
                timeout=f"Model '{self.name}' ({self.endpoint}) sent nothing for {timeout:g} s"
                + (f" after {events} event(s)" if progress is not None else ""),
            )
            if error is None:
                raise
            raise error from e
        return parse_converse(raw, model=self.name)

    async def _read_stream(
        self, reply: Any, assembler: StreamAssembler, on_delta: DeltaCallback | None
    ) -> ModelResponse:
        reader = FrameReader(self.name)
        async for chunk in reply.aiter_bytes():
            for frame in reader.feed(chunk):
                if frame.kind != "event":
                    raise stream_exception(
                        frame.name, frame.payload, model=self.name, endpoint=self.endpoint
                    )
                try:
                    payload = loads_safely(frame.payload) if frame.payload else {}
                except ValueError as e:
                    raise LLMResponseError(
                        f"Model '{self.name}' sent a {frame.name} event that is not JSON ({e})",
                        model=self.name,
                    ) from e
                text = assembler.add(frame.name, payload if isinstance(payload, dict) else {})
                if text and on_delta is not None:
                    await deliver(on_delta, text)
        return assembler.response(self.endpoint)

    async def _ready(self) -> None:
        """The first request imports httpx2 and botocore's parts off the loop (about half a
        second of imports a step should not block the loop for)."""
        warm = self._warm
        if warm is not None and warm.done() and not warm.cancelled() and warm.exception() is None:
            return
        if all(name in sys.modules for name in _PARTS):  # another model imported them
            return
        if warm is None or warm.done() or warm.get_loop() is not asyncio.get_running_loop():
            warm = self._warm = start_in_thread(_import_parts, name="bedrock-imports")
        await asyncio.shield(warm)

    def _warn_ignored(self, keys: list[str]) -> None:
        for key in keys:
            if key not in self._warned:
                self._warned.add(key)
                logger.warning(f"Bedrock's Converse API has no request field {key!r}; not sent")

    @property
    def connected(self) -> bool:
        """Whether an HTTP client is open (after a request, until :meth:`aclose`)."""
        return self.http.connected

    async def aclose(self) -> None:
        """Close the HTTP connections (optional: they are also released at exit)."""
        await self.http.aclose()


#: Model ids (or parts of them) Bedrock's prompt caching works for; a cache point sent to
#: another model is refused.
CACHING_MODELS = (
    "claude-3-7",
    "claude-3-5-haiku",
    "claude-sonnet-4",
    "claude-opus-4",
    "claude-haiku-4",
    "amazon.nova-",
)


def caches_prompts(model_id: str) -> bool:
    """Whether Bedrock caches prompts for this model (Claude 3.7 and later, Nova)."""
    name = model_id.lower()
    return any(marker in name for marker in CACHING_MODELS)


#: What a request needs, imported off the loop by the first one.
_PARTS = ("botocore.auth", "botocore.awsrequest", "botocore.eventstream", "httpx2")


def _import_parts() -> None:
    for name in _PARTS:
        importlib.import_module(name)


def _profile_region(profile: str | None, environ: Mapping[str, str]) -> str | None:
    """The region of the profile in the AWS config file (``AWS_CONFIG_FILE``, else
    ``~/.aws/config``), read the way botocore reads it; None when it names none."""
    from botocore.configloader import load_config  # 20 ms, only when no region is given
    from botocore.exceptions import ConfigNotFound, ConfigParseError

    name = profile or environ.get("AWS_PROFILE") or environ.get("AWS_DEFAULT_PROFILE") or "default"
    path = environ.get("AWS_CONFIG_FILE") or "~/.aws/config"
    try:
        profiles = load_config(os.path.expanduser(path)).get("profiles", {})
    except ConfigNotFound:
        return None
    except (ConfigParseError, OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"The AWS config file {path} cannot be read: {e}") from e
    section = profiles.get(name)
    region = section.get("region") if isinstance(section, dict) else None
    return checked_region(region, f"The region of AWS profile {name!r} in {path}")


async def _head(reply: Any, limit: int) -> bytes:
    """At most ``limit`` bytes of a body (an error's: a hostile endpoint may send no end)."""
    data = bytearray()
    async for chunk in reply.aiter_bytes():
        data += chunk
        if len(data) >= limit:
            break
    return bytes(data[:limit])
