"""A scripted Amazon Bedrock runtime (Converse and ConverseStream), built from the public API
reference, for driving Bedrock models deterministically over real HTTP.

It answers ``POST /model/{modelId}/converse`` with JSON and ``/model/{modelId}/converse-stream``
with ``application/vnd.amazon.eventstream`` frames (prelude and message CRC32s), from the same
script objects as :class:`~app.testing.ScriptedLLMServer` (``text``, ``tool_calls``,
``error``, ``slow``, ``stall``, ``cut``, ``drop``, ``stream_error``, ``raw``), in Bedrock's
form: ``error(429)`` is a ``ThrottlingException``, a stream error an exception frame.

It checks what the real service checks: every request's SigV4 signature, recomputed with
botocore for its key pair (a wrong secret or a changed body is ``InvalidSignatureException``),
or its Bedrock API key (``Authorization: Bearer``); alternating roles; ``toolResult`` blocks
paired with the previous turn's ``toolUse`` ids; reasoning blocks sent back unchanged (their
signatures are the server's own); at most four cache points; a context limit ("Input is too
long for requested model"). Prompt caching is simulated: a prefix up to a cache point that an
earlier request wrote is read from the cache (``cacheReadInputTokens``). Every request is
recorded, so tests count retries. Its command line is ``python -m app.testing.bedrock_server``.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import datetime
import hashlib
import hmac
import itertools
import json
import re
import secrets
import struct
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from app.testing.http import Connection, HTTPRequest
from app.testing.replies import (
    CutReply,
    DropReply,
    ErrorReply,
    RawReply,
    Reply,
    TextReply,
    ToolCallsReply,
    Usage,
)
from app.testing.scripted_base import ResponderFailed, ScriptedServer
from app.testing.wire import split_arguments, split_text

#: The key pair the server accepts unless given others (test values, never real keys).
TEST_ACCESS_KEY = "AKIASCRIPTEDBEDROCK0"
TEST_SECRET_KEY = "scripted-bedrock-secret-0123456789abcdefgh"
#: The content type of an event stream.
EVENT_STREAM = "application/vnd.amazon.eventstream"
#: How far a request's X-Amz-Date may be from the server's clock (as AWS allows).
CLOCK_SKEW = datetime.timedelta(minutes=15)

_PATH = re.compile(r"^/model/(?P<model>[^/]+)/(?P<operation>converse|converse-stream)$")
_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_STOP_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "length": "max_tokens",
    "content_filter": "content_filtered",
}
#: Our statuses as Bedrock's exceptions: (status it answers with, exception name).
_EXCEPTIONS = {
    400: (400, "ValidationException"),
    401: (403, "UnrecognizedClientException"),
    403: (403, "AccessDeniedException"),
    404: (404, "ResourceNotFoundException"),
    408: (408, "ModelTimeoutException"),
    424: (424, "ModelErrorException"),
    429: (429, "ThrottlingException"),
    500: (500, "InternalServerException"),
    503: (503, "ServiceUnavailableException"),
}
_IMAGE_MAGIC = {
    "png": b"\x89PNG\r\n\x1a\n",
    "jpeg": b"\xff\xd8\xff",
    "gif": b"GIF8",
    "webp": b"RIFF",
}
#: Tokens an image counts for, whatever its size (the context limit and usage estimates).
IMAGE_TOKENS = 1_000
MAX_CACHE_POINTS = 4

Responder = Callable[["BedrockRequest"], Any]

_START = (
    "A conversation must start with a user message. Try again with a conversation that starts "
    "with a user message."
)
_ALTERNATE = (
    "A conversation must alternate between user and assistant roles. Make sure the "
    "conversation alternates between user and assistant roles and try again."
)


# --- the event-stream encoding --------------------------------------------------------------


def frame(headers: Iterable[tuple[str, str]], payload: bytes) -> bytes:
    """One event-stream message: prelude (total and headers length, CRC32), string headers,
    payload, CRC32 of everything before it."""
    encoded = b"".join(
        bytes([len(name)]) + name + b"\x07" + struct.pack(">H", len(value)) + value
        for name, value in ((n.encode("utf-8"), v.encode("utf-8")) for n, v in headers)
    )
    prelude = struct.pack(">II", 16 + len(encoded) + len(payload), len(encoded))
    head = prelude + struct.pack(">I", binascii.crc32(prelude))
    message = head + encoded + payload
    return message + struct.pack(">I", binascii.crc32(message))


def event_frame(event_type: str, payload: Mapping[str, Any]) -> bytes:
    """An ``event`` message (``messageStart``, ``contentBlockDelta``, ...)."""
    headers = [
        (":event-type", event_type),
        (":content-type", "application/json"),
        (":message-type", "event"),
    ]
    return frame(headers, json.dumps(payload).encode("utf-8"))


def exception_frame(exception_type: str, message: str) -> bytes:
    """An ``exception`` message, as a stream ends on a failure (``throttlingException``...)."""
    headers = [
        (":exception-type", exception_type),
        (":content-type", "application/json"),
        (":message-type", "exception"),
    ]
    return frame(headers, json.dumps({"message": message}).encode("utf-8"))


# --- what the server received --------------------------------------------------------------


@dataclass(frozen=True)
class BedrockRequest:
    """One request as the server saw it (every route, in arrival order): ``operation`` is
    ``converse``, ``converse-stream`` or ``None`` (no such route); ``auth`` how it proved
    itself (``sigv4``, ``bearer``) when it did; ``rejected`` the exception it got instead of a
    scripted reply (``InvalidSignatureException``, ``ValidationException``...), if any."""

    index: int
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes
    model_id: str | None = None
    operation: str | None = None
    auth: str | None = None
    access_key: str | None = None
    rejected: str | None = None
    received_at: float = field(default_factory=time.time)

    @property
    def stream(self) -> bool:
        return self.operation == "converse-stream"

    @property
    def messages(self) -> list[Any]:
        value = self.body.get("messages") if isinstance(self.body, dict) else None
        return value if isinstance(value, list) else []

    @property
    def system(self) -> list[Any]:
        value = self.body.get("system") if isinstance(self.body, dict) else None
        return value if isinstance(value, list) else []

    @property
    def tool_config(self) -> dict[str, Any] | None:
        value = self.body.get("toolConfig") if isinstance(self.body, dict) else None
        return value if isinstance(value, dict) else None

    @property
    def tools(self) -> list[Any] | None:
        """The tool specs offered (``None`` without a ``toolConfig``)."""
        config = self.tool_config
        if config is None:
            return None
        return [
            t["toolSpec"]
            for t in config.get("tools", [])
            if isinstance(t, dict) and "toolSpec" in t
        ]

    @property
    def inference(self) -> dict[str, Any]:
        value = self.body.get("inferenceConfig") if isinstance(self.body, dict) else None
        return value if isinstance(value, dict) else {}

    @property
    def thinking(self) -> bool:
        """Whether the request enables reasoning (Claude's ``thinking``)."""
        extra = (
            self.body.get("additionalModelRequestFields") if isinstance(self.body, dict) else None
        )
        thinking = extra.get("thinking") if isinstance(extra, dict) else None
        return isinstance(thinking, dict) and thinking.get("type") == "enabled"

    def to_json(self) -> dict[str, Any]:
        """A JSON-able record (the command line's ``--log``)."""
        return {
            "index": self.index,
            "method": self.method,
            "path": self.path,
            "headers": self.headers,
            "body": self.body if self.body is not None else self.raw.decode("utf-8", "replace"),
            "route": self.operation or "unknown",
        }


class Rejection(Exception):
    """What the service answers instead of the model: status, exception name, message."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status, self.kind, self.message = status, kind, message


# --- the server -----------------------------------------------------------------------------


class ScriptedBedrockServer(ScriptedServer[BedrockRequest]):
    """A Bedrock runtime endpoint that answers from a script (then ``responder``, then HTTP
    400), for one key pair (``access_key``, ``secret_key``, ``session_token``) and/or one
    Bedrock API key (``bearer_token``), in one ``region``. ``context_limit`` is the input a
    request may have (estimated at 4 characters a token); ``cache_min_tokens`` the shortest
    prefix a cache point caches."""

    label = "scripted Bedrock server"

    def __init__(
        self,
        script: Iterable[Reply | str | Mapping[str, Any]] = (),
        responder: Responder | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        region: str = "us-west-2",
        access_key: str | None = TEST_ACCESS_KEY,
        secret_key: str = TEST_SECRET_KEY,
        session_token: str | None = None,
        bearer_token: str | None = None,
        context_limit: int = 200_000,
        cache_min_tokens: int = 1024,
        on_request: Callable[[BedrockRequest], None] | None = None,
    ) -> None:
        super().__init__(
            script,
            responder,
            host=host,
            port=port,
            thread_name=f"scripted-bedrock-{id(self):x}",
            on_request=on_request,
        )
        self.region = region
        self.access_key = access_key
        self.secret_key = secret_key
        self.session_token = session_token
        self.bearer_token = bearer_token
        self.context_limit = context_limit
        self.cache_min_tokens = cache_min_tokens
        self._ids = itertools.count(1)
        self._signing_key = secrets.token_bytes(32)  # signs the reasoning it sends
        self._redacted: set[str] = set()  # redacted reasoning it sent
        self._thoughts: dict[str, tuple[str, ...]] = {}  # toolUse id -> its turn's reasoning
        self._cache: set[str] = set()  # prefixes written to the prompt cache

    # --- public state ---------------------------------------------------------------------

    @property
    def endpoint_url(self) -> str:
        """The URL to give a client (``AWS_ENDPOINT_URL_BEDROCK_RUNTIME``, ``base_url``,
        boto3's ``endpoint_url``)."""
        return self.root_url

    def env(self) -> dict[str, str]:
        """Environment variables that point an AWS client here with the server's key pair."""
        values = {
            "AWS_ENDPOINT_URL_BEDROCK_RUNTIME": self.endpoint_url,
            "AWS_REGION": self.region,
        }
        if self.access_key is not None:
            values |= {
                "AWS_ACCESS_KEY_ID": self.access_key,
                "AWS_SECRET_ACCESS_KEY": self.secret_key,
            }
        if self.session_token is not None:
            values["AWS_SESSION_TOKEN"] = self.session_token
        return values

    @property
    def answered(self) -> list[BedrockRequest]:
        """The requests that reached the model (signed right, valid), each taking a reply."""
        return [r for r in self.requests if r.operation and r.rejected is None]

    # --- one request ----------------------------------------------------------------------

    async def _respond(self, conn: Connection, request: HTTPRequest) -> bool:
        path = request.target.partition("?")[0]
        route = _PATH.match(path)
        body: Any = None
        rejection: Rejection | None = None
        model_id = operation = auth = access_key = None
        if route is None:
            rejection = Rejection(404, "UnknownOperationException", f"No operation at {path}")
        elif request.method != "POST":
            rejection = Rejection(405, "UnknownOperationException", f"{request.method} {path}")
        else:
            model_id, operation = unquote(route.group("model")), route.group("operation")
            try:
                auth, access_key = self._authenticate(request)
                body = _json(request.body)
                self._validate(body)
            except Rejection as e:
                rejection = e
        captured, reply = self._capture(
            lambda index: BedrockRequest(
                index=index,
                method=request.method,
                path=path,
                headers=dict(request.headers),
                body=body if body is not None else _maybe_json(request.body),
                raw=request.body,
                model_id=model_id,
                operation=operation,
                auth=auth,
                access_key=access_key,
                rejected=rejection.kind if rejection else None,
            ),
            takes_reply=rejection is None,
        )
        if rejection is not None:
            return _send_exception(conn, rejection.status, rejection.kind, rejection.message)
        try:
            reply = await self._reply_for(captured, reply)
        except ResponderFailed as exc:
            return _send_exception(conn, 500, "InternalServerException", f"responder: {exc}")
        if reply is None:
            message = f"scripted Bedrock server: script exhausted after {captured.index} requests"
            return _send_exception(conn, 400, "ValidationException", message)
        with self._watching(conn, captured.index):
            return await self._send_reply(conn, captured, reply)

    # --- authentication -------------------------------------------------------------------

    def _authenticate(self, request: HTTPRequest) -> tuple[str, str | None]:
        header = request.headers.get("authorization", "")
        if header.startswith("Bearer "):
            token = header[7:].strip()
            if self.bearer_token and hmac.compare_digest(
                token.encode(), self.bearer_token.encode()
            ):
                return "bearer", None
            raise Rejection(
                403, "UnrecognizedClientException", "Authentication failed: the API key is invalid."
            )
        if not header.startswith("AWS4-HMAC-SHA256 "):
            raise Rejection(
                403, "MissingAuthenticationTokenException", "Missing Authentication Token"
            )
        fields = dict(part.strip().split("=", 1) for part in header[17:].split(",") if "=" in part)
        try:
            key, date, region, service, terminal = fields["Credential"].split("/")
            signed = fields["SignedHeaders"].split(";")
            signature = fields["Signature"]
        except (KeyError, ValueError):
            raise Rejection(
                403, "IncompleteSignatureException", f"Malformed Authorization: {header[:60]}"
            ) from None
        if self.access_key is None or not hmac.compare_digest(
            key.encode(), self.access_key.encode()
        ):
            raise Rejection(
                403,
                "UnrecognizedClientException",
                "The security token included in the request is invalid.",
            )
        stamp = request.headers.get("x-amz-date", "")
        if "host" not in signed or "x-amz-date" not in signed or not stamp.startswith(date):
            raise Rejection(
                403,
                "IncompleteSignatureException",
                "host and x-amz-date must be signed, with the scope's date",
            )
        if service != "bedrock" or terminal != "aws4_request":
            raise Rejection(
                403,
                "InvalidSignatureException",
                "Credential should be scoped to correct service: 'bedrock'.",
            )
        if region != self.region:
            raise Rejection(
                403,
                "InvalidSignatureException",
                f"Credential should be scoped to a valid region: '{self.region}'.",
            )
        try:
            when = datetime.datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=datetime.UTC)
        except ValueError:
            raise Rejection(
                403, "IncompleteSignatureException", f"X-Amz-Date {stamp!r} is not a date"
            ) from None
        if abs(datetime.datetime.now(datetime.UTC) - when) > CLOCK_SKEW:
            raise Rejection(
                403,
                "InvalidSignatureException",
                "Signature expired: the request is more than 15 minutes from the server's time.",
            )
        session = request.headers.get("x-amz-security-token")
        if self.session_token is not None and (
            session is None
            or "x-amz-security-token" not in signed
            or not hmac.compare_digest(session.encode(), self.session_token.encode())
        ):
            raise Rejection(
                403,
                "UnrecognizedClientException",
                "The security token included in the request is invalid.",
            )
        expected = self._signature(request, signed, stamp, region, session)
        if not hmac.compare_digest(expected.encode(), signature.encode()):
            raise Rejection(
                403,
                "InvalidSignatureException",
                "The request signature we calculated does not match the signature you provided. "
                "Check your AWS Secret Access Key and signing method.",
            )
        return "sigv4", key

    def _signature(
        self, request: HTTPRequest, signed: list[str], stamp: str, region: str, token: str | None
    ) -> str:
        """The signature of ``request`` over its ``signed`` headers, recomputed by botocore."""
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials

        headers = {name: request.headers.get(name, "") for name in signed}
        url = f"http://{request.headers.get('host', '')}{request.target}"
        copy = AWSRequest(method=request.method, url=url, data=request.body, headers=headers)
        copy.context["timestamp"] = stamp
        signer = SigV4Auth(Credentials(self.access_key, self.secret_key, token), "bedrock", region)
        return str(
            signer.signature(signer.string_to_sign(copy, signer.canonical_request(copy)), copy)
        )

    # --- what Converse enforces -----------------------------------------------------------

    def _validate(self, body: Any) -> None:
        def invalid(message: str) -> Rejection:
            return Rejection(400, "ValidationException", message)

        if not isinstance(body, dict):
            raise invalid("The request body must be a JSON object.")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise invalid(_START)
        config = body.get("toolConfig")
        names = self._check_tools(config, invalid)
        inference = body.get("inferenceConfig", {})
        if not isinstance(inference, dict):
            raise invalid("inferenceConfig must be an object.")
        temperature = inference.get("temperature")
        if temperature is not None and not (
            isinstance(temperature, int | float) and 0 <= temperature <= 1
        ):
            raise invalid("inferenceConfig.temperature: must be between 0 and 1.")
        max_tokens = inference.get("maxTokens")
        if max_tokens is not None and not (isinstance(max_tokens, int) and max_tokens >= 1):
            raise invalid("inferenceConfig.maxTokens: must be a positive integer.")
        thinking = BedrockRequest(0, "", "", {}, body, b"").thinking
        if thinking and temperature not in (None, 1):
            raise invalid("temperature may only be set to 1 when thinking is enabled.")
        if thinking and isinstance(config, dict) and set(config.get("toolChoice") or {}) - {"auto"}:
            raise invalid("Thinking may not be enabled when tool_choice forces tool use.")
        for key in ("system",):
            for j, block in enumerate(body.get(key) or []):
                if isinstance(block, dict) and "text" in block and not str(block["text"]).strip():
                    raise invalid(
                        f"The text field in the SystemContentBlock at system.{j} is blank."
                    )
        previous_uses: list[str] = []
        last_uses: tuple[int, list[Any], list[str]] | None = None
        for i, message in enumerate(messages):
            if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
                raise invalid(f"messages.{i}.role must be user or assistant.")
            role = message["role"]
            content = message.get("content")
            if i == 0 and role != "user":
                raise invalid(_START)
            if i > 0 and messages[i - 1].get("role") == role:
                raise invalid(_ALTERNATE)
            if not isinstance(content, list) or not content:
                raise invalid(
                    f"The content field in the Message object at messages.{i} is empty. "
                    "Add a ContentBlock object to the content field and try again."
                )
            uses, results = self._check_blocks(i, role, content, names is not None, invalid)
            if role == "user" and (previous_uses or results):
                missing = [u for u in previous_uses if u not in results]
                if missing:
                    raise invalid(
                        f"Expected toolResult blocks at messages.{i}.content for the "
                        f"following Ids: {', '.join(missing)}"
                    )
                if extra := [r for r in results if r not in previous_uses]:
                    raise invalid(
                        f"The toolResult blocks at messages.{i}.content name toolUse ids of no "
                        f"previous turn: {', '.join(extra)}"
                    )
            previous_uses = uses if role == "assistant" else []
            if role == "assistant":
                last_uses = (i, content, uses)
        if thinking and last_uses is not None:
            self._check_thinking_turn(*last_uses, invalid)
        points = _cache_points(body)
        if points > MAX_CACHE_POINTS:
            raise invalid(
                f"The request has {points} cache points; at most {MAX_CACHE_POINTS} are allowed."
            )
        if prompt_tokens(body) > self.context_limit:
            raise invalid("Input is too long for requested model.")

    def _check_tools(self, config: Any, invalid: Callable[[str], Rejection]) -> set[str] | None:
        if config is None:
            return None
        if (
            not isinstance(config, dict)
            or not isinstance(config.get("tools"), list)
            or not config["tools"]
        ):
            raise invalid("toolConfig.tools must be a non-empty list.")
        names: set[str] = set()
        for k, tool in enumerate(config["tools"]):
            if isinstance(tool, dict) and set(tool) == {"cachePoint"}:
                continue
            spec = tool.get("toolSpec") if isinstance(tool, dict) else None
            if not isinstance(spec, dict) or not _TOOL_NAME.match(str(spec.get("name", ""))):
                raise invalid(
                    f"toolConfig.tools.{k}.toolSpec.name must match [a-zA-Z0-9_-]{{1,64}}."
                )
            schema = spec.get("inputSchema")
            if not isinstance(schema, dict) or not isinstance(schema.get("json"), dict):
                raise invalid(
                    f"toolConfig.tools.{k}.toolSpec.inputSchema.json must be a JSON object."
                )
            names.add(spec["name"])
        choice = config.get("toolChoice")
        if choice is not None:
            if (
                not isinstance(choice, dict)
                or len(choice) != 1
                or not set(choice) <= {"auto", "any", "tool"}
            ):
                raise invalid("toolConfig.toolChoice must be one of auto, any, tool.")
            named = choice.get("tool")
            if "tool" in choice and (not isinstance(named, dict) or named.get("name") not in names):
                raise invalid("toolConfig.toolChoice.tool.name names no tool of the request.")
        return names

    def _check_blocks(
        self,
        i: int,
        role: str,
        content: list[Any],
        tools: bool,
        invalid: Callable[[str], Rejection],
    ) -> tuple[list[str], list[str]]:
        uses: list[str] = []
        results: list[str] = []
        for j, block in enumerate(content):
            where = f"messages.{i}.content.{j}"
            if not isinstance(block, dict) or len(block) != 1:
                raise invalid(f"{where} must hold exactly one content type.")
            kind, value = next(iter(block.items()))
            if kind != "text" and not isinstance(value, dict):
                raise invalid(f"{where}.{kind} must be an object.")
            if kind == "text":
                if not isinstance(value, str) or not value.strip():
                    raise invalid(
                        f"The text field in the ContentBlock object at {where} is blank. "
                        "Add text to the text field, and try again."
                    )
            elif kind in ("toolUse", "toolResult"):
                if not tools:
                    raise invalid(
                        "The toolConfig field must be defined when using toolUse and toolResult "
                        "content blocks."
                    )
                if (kind == "toolUse") != (role == "assistant"):
                    raise invalid(
                        f"{where}: {kind} blocks belong to "
                        f"{'assistant' if kind == 'toolUse' else 'user'} turns."
                    )
                if kind == "toolUse" and not isinstance(value.get("input"), dict):
                    raise invalid(f"{where}.toolUse.input must be a JSON object.")
                (uses if kind == "toolUse" else results).append(str(value.get("toolUseId")))
                inner_blocks = value.get("content") if kind == "toolResult" else None
                for k, inner in enumerate(inner_blocks if isinstance(inner_blocks, list) else []):
                    if isinstance(inner, dict) and "image" in inner:
                        _check_image(inner["image"], f"{where}.toolResult.content.{k}", invalid)
            elif kind == "image":
                _check_image(value, where, invalid)
            elif kind == "reasoningContent":
                if role != "assistant":
                    raise invalid(f"{where}: reasoning belongs to assistant turns.")
                self._check_reasoning(value, where, invalid)
            elif kind != "cachePoint":
                raise invalid(f"{where}: unsupported content block {kind!r}.")
        return uses, results

    def _check_reasoning(self, value: Any, where: str, invalid: Callable[[str], Rejection]) -> None:
        redacted = value.get("redactedContent") if isinstance(value, dict) else None
        if redacted is not None:
            if redacted not in self._redacted:
                raise invalid(f"{where}: the redacted reasoning is not one this model sent.")
            return
        text = value.get("reasoningText") if isinstance(value, dict) else None
        if not isinstance(text, dict) or not hmac.compare_digest(
            str(text.get("signature") or ""), self._sign(str(text.get("text", "")))
        ):
            raise invalid(
                f"{where}: Invalid signature in the reasoning block: it must be sent back "
                "unchanged."
            )

    def _check_thinking_turn(
        self, i: int, content: list[Any], uses: list[str], invalid: Callable[[str], Rejection]
    ) -> None:
        sent = [json.dumps(b, sort_keys=True) for b in content if "reasoningContent" in b]
        for use in uses:
            expected = self._thoughts.get(use)
            if expected and list(expected) != sent[: len(expected)]:
                raise invalid(
                    f"messages.{i}.content: Expected the reasoning blocks of this turn before its "
                    "toolUse blocks: with thinking enabled, an assistant turn that uses tools must "
                    "start with the reasoning it came with, unchanged."
                )

    def _sign(self, text: str) -> str:
        digest = hmac.new(self._signing_key, text.encode("utf-8"), hashlib.sha256).digest()
        return base64.b64encode(digest).decode("ascii")

    # --- answers --------------------------------------------------------------------------

    async def _send_reply(self, conn: Connection, req: BedrockRequest, scripted: Reply) -> bool:
        reply, interruption = await self._unwrap(conn, req.index, scripted, req.stream)
        if reply is None or isinstance(reply, DropReply):
            return False
        if isinstance(reply, ErrorReply):
            status, kind = _exception_of(reply)
            return _send_exception(conn, status, kind, reply.message, reply.headers)
        if isinstance(reply, RawReply):
            return self._send_raw(conn, reply)
        if not isinstance(reply, TextReply | ToolCallsReply):  # pragma: no cover - guarded
            raise TypeError(f"cannot send {reply!r}")
        blocks = self._blocks(req, reply)
        usage = self._usage(req, reply, blocks)
        stop = _STOP_REASONS.get(reply.finish_reason, reply.finish_reason)
        if req.stream:
            head = [
                ("Content-Type", EVENT_STREAM),
                ("Transfer-Encoding", "chunked"),
                ("x-amzn-RequestId", _request_id()),
            ]
            events = _events(blocks, stop, usage)
            return await self._stream(conn, req.index, head, events, interruption, _error_frame)
        payload: dict[str, Any] = {
            "output": {"message": {"role": "assistant", "content": blocks}},
            "stopReason": stop,
            "metrics": {"latencyMs": 1},
        }
        if usage is not None:
            payload["usage"] = usage
        data = json.dumps(payload).encode("utf-8")
        if isinstance(interruption, CutReply):  # announce the whole body, send half, hang up
            return await self._send_cut(conn, data)
        conn.send_plain(200, data, headers=[("x-amzn-RequestId", _request_id())])
        return True

    def _blocks(
        self, req: BedrockRequest, reply: TextReply | ToolCallsReply
    ) -> list[dict[str, Any]]:
        """The answer's content blocks: reasoning (when the request enables it), text, tools."""
        blocks: list[dict[str, Any]] = []
        if req.thinking and reply.thinking is not None:
            text = {"text": reply.thinking, "signature": self._sign(reply.thinking)}
            blocks.append({"reasoningContent": {"reasoningText": text}})
        if req.thinking and reply.redacted_thinking is not None:
            data = base64.b64encode(
                hmac.new(
                    self._signing_key, reply.redacted_thinking.encode(), hashlib.sha256
                ).digest()
                * 2
            ).decode()
            self._redacted.add(data)
            blocks.append({"reasoningContent": {"redactedContent": data}})
        thoughts = tuple(json.dumps(b, sort_keys=True) for b in blocks)
        if reply.content:
            blocks.append({"text": reply.content})
        for call in reply.calls if isinstance(reply, ToolCallsReply) else ():
            use_id = call.id or f"tooluse_{next(self._ids):04d}{secrets.token_hex(8)}"
            if thoughts:
                self._thoughts[use_id] = thoughts
            arguments: Any = call.arguments if call.is_mapping else call.arguments_text
            blocks.append({"toolUse": {"toolUseId": use_id, "name": call.name, "input": arguments}})
        return blocks

    def _usage(
        self, req: BedrockRequest, reply: TextReply | ToolCallsReply, blocks: list[dict[str, Any]]
    ) -> dict[str, int] | None:
        """Bedrock's usage: scripted counts, else estimated; prompt caching simulated."""
        if reply.usage is False:
            return None
        read, written = self._caching(req.body)
        if isinstance(reply.usage, Usage):
            prompt, output = reply.usage.prompt_tokens, reply.usage.completion_tokens
        else:
            prompt, output = prompt_tokens(req.body), len(json.dumps(blocks)) // 4 + 1
        usage = {
            "inputTokens": max(prompt - read - written, 0),
            "outputTokens": output,
            "totalTokens": prompt + output,
        }
        if read or written:
            usage |= {"cacheReadInputTokens": read, "cacheWriteInputTokens": written}
        return usage

    def _caching(self, body: dict[str, Any]) -> tuple[int, int]:
        """(tokens read from the cache, tokens written to it): a prefix up to a cache point is
        read when an earlier request wrote that very prefix, written when it is new and long
        enough; what lies after the last cache point is not cached."""
        read = written = 0
        with self._lock:
            for digest, tokens in _prefixes(body):
                if tokens < self.cache_min_tokens:
                    continue
                if digest in self._cache:
                    read = max(read, tokens)
                else:
                    self._cache.add(digest)
                    written = max(written, tokens)
        return read, max(written - read, 0)


# --- pieces of an answer ------------------------------------------------------------------


def _events(blocks: list[dict[str, Any]], stop: str, usage: dict[str, int] | None) -> list[bytes]:
    """The ConverseStream events of an answer: the text in word pieces, a tool's input in two
    or three, reasoning text then its signature."""
    events = [event_frame("messageStart", {"role": "assistant"})]
    for index, block in enumerate(blocks):
        position = {"contentBlockIndex": index}
        deltas: list[dict[str, Any]] = []
        if "text" in block:
            deltas = [{"text": piece} for piece in split_text(block["text"])]
        elif "toolUse" in block:
            use = block["toolUse"]
            start = {"toolUse": {"toolUseId": use["toolUseId"], "name": use["name"]}}
            events.append(event_frame("contentBlockStart", {"start": start, **position}))
            text = use["input"] if isinstance(use["input"], str) else json.dumps(use["input"])
            deltas = [{"toolUse": {"input": piece}} for piece in split_arguments(text)]
        elif "reasoningContent" in block:
            reasoning = block["reasoningContent"]
            if "redactedContent" in reasoning:
                deltas = [{"reasoningContent": {"redactedContent": reasoning["redactedContent"]}}]
            else:
                inner = reasoning["reasoningText"]
                deltas = [{"reasoningContent": {"text": p}} for p in split_text(inner["text"])]
                deltas.append({"reasoningContent": {"signature": inner["signature"]}})
        events += [event_frame("contentBlockDelta", {"delta": d, **position}) for d in deltas]
        events.append(event_frame("contentBlockStop", position))
    events.append(event_frame("messageStop", {"stopReason": stop}))
    if usage is not None:
        events.append(event_frame("metadata", {"usage": usage, "metrics": {"latencyMs": 1}}))
    return events


def _error_frame(error: ErrorReply) -> bytes:
    """The exception frame a stream ends with on ``error`` (``throttlingException``...)."""
    _, kind = _exception_of(error)
    return exception_frame(kind[:1].lower() + kind[1:], error.message)


def _exception_of(reply: ErrorReply) -> tuple[int, str]:
    """The status and exception name of a scripted error: its ``code`` when it names an
    exception (``ModelNotReadyException``), else the usual one for its status."""
    if reply.code and reply.code.endswith("Exception"):
        return reply.status, reply.code
    if reply.status in _EXCEPTIONS:
        return _EXCEPTIONS[reply.status]
    return reply.status, "InternalServerException" if reply.status >= 500 else "ValidationException"


def _send_exception(
    conn: Connection, status: int, kind: str, message: str, headers: Iterable[tuple[str, str]] = ()
) -> bool:
    fields = [
        ("x-amzn-ErrorType", f"{kind}:http://internal.amazon.com/coral/com.amazon.bedrock/"),
        ("x-amzn-RequestId", _request_id()),
        *headers,
    ]
    conn.send_plain(status, json.dumps({"message": message}).encode("utf-8"), headers=fields)
    return True


def _request_id() -> str:
    return str(uuid.uuid4())


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError as e:
        raise Rejection(
            400, "SerializationException", f"The request body is not JSON: {e}"
        ) from None


def _maybe_json(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None


def _check_image(image: Any, where: str, invalid: Callable[[str], Rejection]) -> None:
    kind = image.get("format") if isinstance(image, dict) else None
    source = image.get("source") if isinstance(image, dict) else None
    if kind not in _IMAGE_MAGIC or not isinstance(source, dict):
        raise invalid(f"{where}.image: format must be png, jpeg, gif or webp, with a source.")
    try:
        data = base64.b64decode(source.get("bytes", ""), validate=True)
    except (binascii.Error, ValueError):
        raise invalid(f"{where}.image.source.bytes is not base64.") from None
    if not data.startswith(_IMAGE_MAGIC[kind]):
        raise invalid(f"{where}.image: Could not process image: the bytes are not {kind}.")


def _units(body: dict[str, Any]) -> list[tuple[str, int]]:
    """The prompt in the order the model reads it (tools, system, messages) as (text, tokens)
    units; a cache point is a unit of its own with no text."""
    units: list[tuple[str, int]] = []

    def add(block: Any) -> None:
        if isinstance(block, dict) and "cachePoint" in block:
            units.append(("", -1))
        elif isinstance(block, dict) and "image" in block:
            units.append((json.dumps(block, sort_keys=True), IMAGE_TOKENS))
        else:
            text = json.dumps(block, sort_keys=True)
            units.append((text, len(text) // 4))

    config = body.get("toolConfig")
    for tool in config.get("tools", []) if isinstance(config, dict) else []:
        add(tool)
    for block in body.get("system") or []:
        add(block)
    for message in body.get("messages") or []:
        units.append((str(message.get("role")), 1))
        for block in message.get("content") or []:
            add(block)
    return units


def prompt_tokens(body: dict[str, Any]) -> int:
    """The request's input, estimated (4 characters a token, an image ``IMAGE_TOKENS``)."""
    return sum(tokens for _, tokens in _units(body) if tokens > 0)


def _cache_points(body: dict[str, Any]) -> int:
    return sum(1 for _, tokens in _units(body) if tokens < 0)


def _prefixes(body: dict[str, Any]) -> list[tuple[str, int]]:
    """(digest, tokens) of the prompt up to each cache point."""
    found: list[tuple[str, int]] = []
    digest = hashlib.sha256()
    total = 0
    for text, tokens in _units(body):
        if tokens < 0:
            found.append((digest.copy().hexdigest(), total))
            continue
        digest.update(text.encode("utf-8") + b"\x00")
        total += tokens
    return found


# --- the command line -----------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """Serve a JSON script until SIGTERM/SIGINT; prints the endpoint URL first."""
    from app.testing.server import serve

    parser = argparse.ArgumentParser(
        prog="python -m app.testing.bedrock_server",
        description="Scripted Bedrock runtime (Converse, ConverseStream); prints its URL, "
        "then serves.",
    )
    parser.add_argument("--script", required=True, help="JSON file holding a list of replies")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0 = any free)")
    parser.add_argument("--region", default="us-west-2")
    parser.add_argument("--access-key", default=TEST_ACCESS_KEY)
    parser.add_argument("--secret-key", default=TEST_SECRET_KEY)
    parser.add_argument("--bearer-token", help="also accept this Bedrock API key")
    parser.add_argument(
        "--log", help="append every request to this file as JSON lines (credentials as ***)"
    )
    args = parser.parse_args(argv)
    return serve(
        "scripted Bedrock server",
        args.script,
        lambda script, log: ScriptedBedrockServer(
            script,
            port=args.port,
            region=args.region,
            access_key=args.access_key,
            secret_key=args.secret_key,
            bearer_token=args.bearer_token,
            on_request=log,
        ),
        port=args.port,
        log=args.log,
    )


if __name__ == "__main__":
    sys.exit(main())
