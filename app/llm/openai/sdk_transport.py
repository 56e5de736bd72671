"""The openai SDK as a transport, for Azure or ``transport = "openai"``: the ready-made body
goes through the client's ``post``; the SDK (imported on first request) and its exceptions
stay here."""

from __future__ import annotations

import asyncio
import time
from typing import Any
from urllib.parse import quote

from app.exceptions import LLMConnectionError, LLMError, LLMTimeoutError
from app.llm.deltas import deliver
from app.llm.openai.errors import translate_error
from app.llm.openai.http_transport import decode_completion, finish_stream
from app.llm.openai.streaming import StreamAssembler
from app.llm.openai.transport import ChatRequest, NoStream, Transport


class OpenAITransport(Transport):
    """Chat requests through ``openai.AsyncOpenAI`` / ``AsyncAzureOpenAI``."""

    name = "openai"

    def __init__(
        self,
        *,
        base_url: str | None,
        api_key: str | None,
        azure: bool = False,
        api_version: str | None = None,
    ) -> None:
        self.base_url = base_url
        self.api_key = api_key
        self.azure = azure
        self.api_version = api_version
        self.endpoint = base_url or ""
        self._client: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _sdk(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            import openai

            # No timeout here: each request gives its own.
            common: dict[str, Any] = {
                "api_key": self.api_key or "no-key-configured",
                "max_retries": 0,
            }
            if not self.azure:
                self._client = openai.AsyncOpenAI(base_url=self.base_url, **common)
            elif self.base_url is None:  # the SDK takes the endpoint from AZURE_OPENAI_ENDPOINT
                self._client = openai.AsyncAzureOpenAI(api_version=self.api_version, **common)
            else:
                self._client = openai.AsyncAzureOpenAI(
                    api_version=self.api_version, azure_endpoint=self.base_url, **common
                )
            self.endpoint = str(self._client.base_url)
            self._loop = loop
        return self._client

    def _path(self, client: Any, model: str) -> str:
        """Azure wants the deployment in the path (its client reads it from a dict body; ours
        is ready-made JSON)."""
        if self.azure and "/deployments" not in str(client.base_url.path):
            return f"/deployments/{quote(model, safe='')}/chat/completions"
        return "/chat/completions"

    async def send(self, request: ChatRequest) -> dict[str, Any]:
        import openai

        client = self._sdk()
        options = {"security": {"bearer_auth": True}, "timeout": request.timeout}
        try:
            if request.stream:
                return await self._stream(client, options, request)
            raw = await client.post(
                self._path(client, request.model),
                content=request.body,
                cast_to=bytes,
                options=options,
            )
        except openai.OpenAIError as e:
            raise translate_error(e, model=request.model, base_url=self.endpoint) from e
        return decode_completion(raw, request.model, self.endpoint)

    async def _stream(
        self, client: Any, options: dict[str, Any], request: ChatRequest
    ) -> dict[str, Any]:
        from openai import AsyncStream
        from openai.types.chat import ChatCompletionChunk

        stream = await client.post(
            self._path(client, request.model),
            content=request.body,
            cast_to=ChatCompletionChunk,
            options=options,
            stream=True,
            stream_cls=AsyncStream[ChatCompletionChunk],
        )
        if "text/html" in stream.response.headers.get("content-type", ""):
            # A web page: the same error as a plain request gets (not a refusal to stream).
            try:
                body = await stream.response.aread()
            finally:
                await stream.close()
            data = decode_completion(body, request.model, self.endpoint)
            raise NoStream(data, "it answered a streamed request with plain JSON")
        assembler = StreamAssembler(request.model)
        last = time.monotonic()
        try:
            async for chunk in stream:
                last = time.monotonic()
                text = assembler.add(chunk.model_dump())
                await deliver(request.on_delta, text)
        except (LLMError, NoStream):
            raise
        except Exception as e:
            import openai

            if isinstance(e, openai.OpenAIError) and not isinstance(e, openai.APITimeoutError):
                raise
            if "timeout" in type(e).__name__.lower():
                raise LLMTimeoutError(
                    f"The stream from model '{request.model}' ({self.endpoint}) stalled: no "
                    f"data for {time.monotonic() - last:.1f} s after {assembler.chunks} "
                    f"chunk(s)",
                    model=request.model,
                ) from e
            raise LLMConnectionError(
                f"The stream from model '{request.model}' ({self.endpoint}) broke after "
                f"{assembler.chunks} chunk(s): {type(e).__name__}: {e}",
                model=request.model,
            ) from e
        finally:
            await stream.close()
        return finish_stream(assembler, request.model, self.endpoint)

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None and self._loop is asyncio.get_running_loop():
            await client.close()
