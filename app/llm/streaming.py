"""A tool-calling turn read as a stream: text deltas go out as they arrive, tool-call deltas
are put back together, and the result has exactly the shape of a non-streamed completion.

Streaming is used only when someone watches the text (an ``on_delta`` callback), so a run
nobody renders keeps the cheaper non-streamed request. An endpoint that refuses streaming
(an HTTP error about ``stream``, or a plain JSON answer to a streamed request) is remembered
on the ``LLM`` and asked without streaming from then on.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from app.exceptions import (
    ContextWindowExceededError,
    LLMBadRequestError,
    LLMConnectionError,
    LLMError,
    LLMResponseError,
    LLMTimeoutError,
)
from app.llm.context import request_gate
from app.llm.errors import translate_error
from app.logger import logger

if TYPE_CHECKING:
    from app.llm.client import LLM
    from app.llm.formatting import Formatted

__all__ = ["DeltaCallback", "StreamAssembler", "streamed_turn"]

#: Receives each piece of the model's text; may be a coroutine function.
DeltaCallback = Callable[[str], Awaitable[None] | None]


class _NoStream(Exception):
    """The endpoint answered a streamed request without a stream (carries the answer)."""

    def __init__(self, data: dict[str, Any] | None) -> None:
        super().__init__("no event stream")
        self.data = data


class StreamAssembler:
    """Collects chat-completion chunks into one completion dict.

    Tool calls are keyed by their ``index``: the id and name come with the first delta of a
    call, the arguments in pieces (text is joined; an object, as some servers send, is kept).
    """

    __slots__ = ("calls", "chunks", "finish_reason", "parts", "usage")

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.chunks = 0

    def add(self, chunk: dict[str, Any]) -> str | None:
        """Take one chunk; returns its text delta, if any."""
        self.chunks += 1
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        text: str | None = None
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            piece = delta.get("content")
            if isinstance(piece, str) and piece:
                self.parts.append(piece)
                text = piece if text is None else text + piece
            for call in delta.get("tool_calls") or ():
                self._add_call(call)
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
        return text

    def _add_call(self, call: dict[str, Any]) -> None:
        index = call.get("index")
        if not isinstance(index, int):
            index = len(self.calls)
        entry = self.calls.setdefault(
            index, {"id": None, "type": "function", "name": "", "arguments": []}
        )
        if call.get("id"):
            entry["id"] = call["id"]
        if call.get("type"):
            entry["type"] = call["type"]
        function = call.get("function") or {}
        name = function.get("name")
        if name and name != entry["name"]:
            entry["name"] += name
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            entry["arguments"].append(arguments)
        elif arguments is not None:
            entry["arguments"] = arguments  # a whole JSON object

    def completion(self) -> dict[str, Any]:
        """The turn as a non-streamed completion body."""
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.parts) or None}
        if self.calls:
            message["tool_calls"] = [
                {
                    "id": entry["id"],
                    "type": entry["type"],
                    "function": {
                        "name": entry["name"],
                        "arguments": "".join(entry["arguments"])
                        if isinstance(entry["arguments"], list)
                        else entry["arguments"],
                    },
                }
                for _, entry in sorted(self.calls.items())
            ]
        data: dict[str, Any] = {
            "object": "chat.completion",
            "choices": [{"index": 0, "message": message,
                         "finish_reason": self.finish_reason or "stop"}],
        }
        if self.usage:
            data["usage"] = self.usage
        return data


async def streamed_turn(
    llm: LLM,
    formatted: Formatted,
    *,
    temperature: float | None,
    extra: dict[str, Any],
    timeout: float | None,
    on_delta: DeltaCallback,
) -> dict[str, Any]:
    """One turn, streamed when the endpoint allows it; the completion dict either way."""
    if not llm.streams_refused:
        body = llm._body(formatted, temperature=temperature, stream=True, extra=extra)
        try:
            return await llm._with_retries(lambda: _stream_once(llm, body, timeout, on_delta))
        except _NoStream as e:
            _refused(llm, "it answered a streamed request without a stream")
            if e.data is not None:
                await _deliver_whole(e.data, on_delta)
                return e.data
        except LLMBadRequestError as e:
            if isinstance(e, ContextWindowExceededError) or "stream" not in str(e).lower():
                raise
            _refused(llm, str(e))
    body = llm._body(formatted, temperature=temperature, stream=False, extra=extra)
    data = await llm._with_retries(lambda: llm._post(body, timeout=timeout, stream=False))
    await _deliver_whole(data, on_delta)
    return data


def _refused(llm: LLM, why: str) -> None:
    llm.streams_refused = True
    logger.info(f"Model '{llm.model}' does not stream ({why}); asking without streaming")


async def _deliver_whole(data: Any, on_delta: DeltaCallback) -> None:
    """A non-streamed answer's text still reaches the watcher, in one piece."""
    try:
        text = data["choices"][0]["message"].get("content")
    except (KeyError, IndexError, TypeError, AttributeError):
        return
    if isinstance(text, str) and text:
        await _call(on_delta, text)


async def _call(on_delta: DeltaCallback, text: str) -> None:
    outcome = on_delta(text)
    if inspect.isawaitable(outcome):
        await outcome


async def _stream_once(
    llm: LLM, body: bytes, timeout: float | None, on_delta: DeltaCallback
) -> dict[str, Any]:
    from app.llm.recording import active_tape

    tape = active_tape.get()
    if tape is not None:
        return await tape.exchange(
            llm, body, lambda: _stream_http(llm, body, timeout, on_delta), on_delta
        )
    return await _stream_http(llm, body, timeout, on_delta)


async def _stream_http(
    llm: LLM, body: bytes, timeout: float | None, on_delta: DeltaCallback
) -> dict[str, Any]:
    import openai

    gate = request_gate.get()
    if gate is not None:
        await gate()
    client = llm._get_client()
    transport = llm._transport
    assembler = StreamAssembler()
    try:
        async with llm._slots:
            if transport is not None:
                await _read_http(llm, transport, body, timeout or llm.timeout, assembler,
                                 on_delta)
            else:
                await _read_sdk(llm, client, body, timeout or llm.timeout, assembler, on_delta)
    except openai.OpenAIError as e:
        raise translate_error(e, model=llm.model, base_url=llm.base_url) from e
    if assembler.chunks == 0:
        raise _NoStream(None)
    return assembler.completion()


async def _read_http(
    llm: LLM, transport: Any, body: bytes, timeout: float, assembler: StreamAssembler,
    on_delta: DeltaCallback,
) -> None:
    """Read the SSE stream on the SDK client's connection pool (the fast transport's)."""
    import httpx2
    import openai

    http = transport._http
    request = http.build_request("POST", transport._url, content=body,
                                 headers=transport._headers, timeout=timeout)
    try:
        response = await http.send(request, stream=True)
    except httpx2.TimeoutException as e:
        raise openai.APITimeoutError(request=request) from e
    except (httpx2.RequestError, OSError) as e:
        raise openai.APIConnectionError(request=request) from e
    try:
        if response.status_code >= 400:
            await response.aread()
            raise transport._client._make_status_error_from_response(response)
        if "text/event-stream" not in response.headers.get("content-type", ""):
            raw = await response.aread()
            raise _NoStream(llm._decode(raw))
        try:
            async for line in response.aiter_lines():
                if not line.startswith("data:"):
                    continue
                payload = line[5:].strip()
                if payload == "[DONE]":
                    break
                await _take(llm, assembler, payload, on_delta)
        except httpx2.TimeoutException as e:
            raise LLMTimeoutError(f"The stream from model '{llm.model}' stalled: {e}",
                                  model=llm.model) from e
        except (httpx2.HTTPError, OSError) as e:
            raise LLMConnectionError(
                f"The connection to model '{llm.model}' broke mid-stream: {e}", model=llm.model
            ) from e
    finally:
        await response.aclose()


async def _read_sdk(
    llm: LLM, client: Any, body: bytes, timeout: float, assembler: StreamAssembler,
    on_delta: DeltaCallback,
) -> None:
    """Azure and other clients: the SDK's own stream reader."""
    from openai import AsyncStream
    from openai.types.chat import ChatCompletionChunk

    from app.llm.client import _stream_error

    stream = await client.post(
        llm._chat_path(client), content=body, cast_to=ChatCompletionChunk,
        options={"security": {"bearer_auth": True}, "timeout": timeout},
        stream=True, stream_cls=AsyncStream[ChatCompletionChunk],
    )
    try:
        async for chunk in stream:
            text = assembler.add(chunk.model_dump())
            if text:
                await _call(on_delta, text)
    except LLMError:
        raise
    except Exception as e:
        raise _stream_error(e, llm) from e


async def _take(llm: LLM, assembler: StreamAssembler, payload: str,
                on_delta: DeltaCallback) -> None:
    try:
        chunk = json.loads(payload)
    except ValueError as e:
        raise LLMResponseError(f"Model '{llm.model}' streamed invalid JSON: {payload[:200]!r}",
                               model=llm.model) from e
    if not isinstance(chunk, dict):
        return
    if chunk.get("error"):
        detail = chunk["error"]
        message = detail.get("message") if isinstance(detail, dict) else detail
        raise LLMResponseError(f"Model '{llm.model}' reported an error mid-stream: {message}",
                               model=llm.model)
    text = assembler.add(chunk)
    if text:
        await _call(on_delta, text)
