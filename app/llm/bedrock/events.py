"""ConverseStream's body: ``application/vnd.amazon.eventstream`` frames (prelude, headers,
payload, CRC32s), read with botocore's parser as the bytes arrive. A frame is an ``event``
(``:event-type``), an ``exception`` (``:exception-type``) or an ``error`` (``:error-code``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.exceptions import LLMResponseError

#: The content type of an event stream.
CONTENT_TYPE = "application/vnd.amazon.eventstream"


@dataclass(frozen=True, slots=True)
class Frame:
    """One message of the stream: its kind (``event``, ``exception`` or ``error``), its name
    (the event's or the exception's type) and its payload (JSON, or the error's message)."""

    kind: str
    name: str
    payload: bytes


class FrameReader:
    """Frames out of the bytes as they arrive; a damaged frame (a CRC that does not match, a
    length out of bounds) is :class:`LLMResponseError`."""

    def __init__(self, model: str) -> None:
        from botocore.eventstream import EventStreamBuffer  # imported off the loop beforehand

        self.model = model
        self._buffer: Any = EventStreamBuffer()
        self.frames = 0

    def feed(self, data: bytes) -> list[Frame]:
        from botocore.eventstream import ParserError

        self._buffer.add_data(data)
        frames: list[Frame] = []
        try:
            for message in self._buffer:
                frames.append(_frame(message.headers, message.payload))
        except ParserError as e:
            raise LLMResponseError(
                f"The event stream from model '{self.model}' is damaged after {self.frames} "
                f"frame(s): {type(e).__name__}: {e}",
                model=self.model,
            ) from e
        self.frames += len(frames)
        return frames


def _frame(headers: dict[str, Any], payload: bytes) -> Frame:
    kind = str(headers.get(":message-type") or "event")
    if kind == "exception":
        return Frame(kind, str(headers.get(":exception-type") or ""), payload)
    if kind == "error":
        message = str(headers.get(":error-message") or "").encode("utf-8")
        return Frame(kind, str(headers.get(":error-code") or ""), message or payload)
    return Frame(kind, str(headers.get(":event-type") or ""), payload)
