"""Upstream's ``ask*`` methods, each a thin layer over :meth:`LLM.request`.

They keep upstream's names and signatures (``ask``, ``ask_stream``, ``ask_with_images``,
``ask_tool``) for code written against upstream; new code calls ``request()``, which returns the
whole ``ModelResponse`` (usage, finish reason, reasoning).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

from app.exceptions import ImagesNotSupportedError, LLMResponseError
from app.llm.messages import attach_images
from app.schema import Message, ToolChoice

if TYPE_CHECKING:
    from app.llm.model import ModelResponse
    from app.llm.transport import DeltaCallback

__all__ = ["Messages", "UpstreamAsk"]

Messages = Sequence[Message | dict[str, Any]]


class UpstreamAsk:
    """Mixed into ``LLM``: upstream's API, built on the one request path."""

    model: str
    supports_images: bool

    if TYPE_CHECKING:

        async def request(
            self,
            messages: Messages,
            system_msgs: Messages | None = None,
            *,
            timeout: float | None = None,
            tools: list[dict[str, Any]] | None = None,
            tool_choice: ToolChoice | str = ToolChoice.AUTO,
            temperature: float | None = None,
            on_delta: DeltaCallback | None = None,
            stream: bool | None = None,
            **kwargs: Any,
        ) -> ModelResponse: ...

    async def ask(
        self,
        messages: Messages,
        system_msgs: Messages | None = None,
        stream: bool | None = None,
        temperature: float | None = None,
        **kwargs: Any,
    ) -> str:
        """A plain text answer. ``stream`` True reads the reply as it is generated, False asks
        for it whole; None leaves it to the profile's ``stream``."""
        return await self._text(messages, system_msgs, stream, temperature, None, kwargs)

    async def _text(
        self,
        messages: Messages,
        system_msgs: Messages | None,
        stream: bool | None,
        temperature: float | None,
        on_delta: DeltaCallback | None,
        kwargs: dict[str, Any],
    ) -> str:
        response = await self.request(
            messages,
            system_msgs,
            temperature=temperature,
            on_delta=on_delta,
            stream=stream,
            **kwargs,
        )
        text = response.message.content
        if not text:
            raise LLMResponseError(
                f"Model '{self.model}' returned an empty answer", model=self.model
            )
        return text

    async def ask_stream(
        self,
        messages: Messages,
        system_msgs: Messages | None = None,
        temperature: float | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[str]:
        """Yield the answer's text as it arrives (a retried stream does not repeat text)."""
        queue: asyncio.Queue[str | None] = asyncio.Queue()

        async def run() -> str:
            try:
                return await self._text(
                    messages, system_msgs, True, temperature, queue.put_nowait, kwargs
                )
            finally:
                queue.put_nowait(None)

        task = asyncio.ensure_future(run())
        try:
            while (piece := await queue.get()) is not None:
                yield piece
            await task
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def ask_with_images(
        self,
        messages: Messages,
        images: list[str | dict[str, Any]],
        system_msgs: Messages | None = None,
        stream: bool = False,
        temperature: float | None = None,
        **kwargs: Any,
    ) -> str:
        """Ask about images (URLs, data URLs or base64), attached to the last user message."""
        if not self.supports_images:
            raise ImagesNotSupportedError(
                f"Model '{self.model}' is not configured for images. Use an [llm.<name>] profile "
                "with a vision model, or set supports_images = true if this model accepts them.",
                model=self.model,
            )
        dicts = attach_images(messages, images)
        return await self.ask(dicts, system_msgs, stream=stream, temperature=temperature, **kwargs)

    async def ask_tool(
        self,
        messages: Messages,
        system_msgs: Messages | None = None,
        timeout: float | None = None,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: ToolChoice | str = ToolChoice.AUTO,
        temperature: float | None = None,
        on_delta: DeltaCallback | None = None,
        **kwargs: Any,
    ) -> Message:
        """One model turn that may call tools; returns the assistant ``Message`` (upstream's
        API). ``request()`` returns the whole ``ModelResponse`` (usage, finish reason)."""
        response = await self.request(
            messages,
            system_msgs,
            timeout=timeout,
            tools=tools,
            tool_choice=tool_choice,
            temperature=temperature,
            on_delta=on_delta,
            **kwargs,
        )
        return response.message
