"""The request pass: a conversation in wire format, repaired (a tool's image moves to a user
message after the tool results; orphaned results are dropped, unanswered calls get a stub).

An agent re-sends its whole history at every step, so the pass keeps a snapshot of its state
before the last message, stored with the conversation's first message; the next request over
the same, unedited messages resumes from it (a C-level identity compare of the lists).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.llm.messages import image_url
from app.llm.openai.wire import WireEntry, dumps, wire_entry
from app.logger import logger
from app.schema import Message, nested_edit_count

IMAGE_OMITTED_NOTE = "[an image was omitted here: model '{model}' is not configured for images]"
_TOOL_IMAGES_INTRO = "Image(s) produced by the tool call(s) above:"
_NOT_EXECUTED = "Error: this tool call was not executed (the step was interrupted)."


def image_part(image: str, detail: str | None = None) -> dict[str, Any]:
    """An ``image_url`` content part from a URL, a data URL or bare base64 data."""
    part: dict[str, Any] = {"type": "image_url", "image_url": {"url": image_url(image)}}
    if detail:
        part["image_url"]["detail"] = detail
    return part


def _parts(entry: WireEntry) -> list[dict[str, Any]]:
    """The image parts of a message: its ``base64_image``, then its ``images``."""
    parts = [image_part(entry.base64_image)] if entry.base64_image else []
    parts.extend(image_part(image.url, image.detail) for image in entry.images or ())
    return parts


@dataclass(slots=True)
class Formatted:
    """A request's messages in wire format: the dicts (shared with the caches: read-only),
    their JSON texts, each one's cache entry when sent unchanged (else None), images left out."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    entries: list[WireEntry | None] = field(default_factory=list)
    fragments: list[bytes] = field(default_factory=list)
    omitted: int = 0


@dataclass(slots=True, eq=False)
class _Pass:
    """One formatting pass over messages, appending wire dicts, entries and JSON texts."""

    supports_images: bool
    model: str
    out: list[dict[str, Any]] = field(default_factory=list)
    entries: list[WireEntry | None] = field(default_factory=list)
    fragments: list[bytes] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)  # the last assistant's unanswered calls
    images: list[dict[str, Any]] = field(default_factory=list)  # parts of the tool results
    omitted: int = 0

    @property
    def clean(self) -> bool:
        return not self.pending and not self.images

    def copy(self) -> _Pass:
        return _Pass(
            self.supports_images,
            self.model,
            self.out[:],
            self.entries[:],
            self.fragments[:],
            self.pending[:],
            self.images[:],
            self.omitted,
        )

    def result(self) -> Formatted:
        return Formatted(self.out, self.entries, self.fragments, self.omitted)

    def _emit(self, wire: dict[str, Any], entry: WireEntry | None) -> None:
        self.out.append(wire)
        self.entries.append(entry)
        self.fragments.append(entry.json if entry is not None else dumps(wire))

    def flush(self) -> None:
        """End a block of tool results: stub unanswered calls, then send the block's images."""
        for call_id in self.pending:
            self._emit({"role": "tool", "tool_call_id": call_id, "content": _NOT_EXECUTED}, None)
        self.pending.clear()
        if self.images:
            if self.supports_images:
                parts: list[dict[str, Any]] = [{"type": "text", "text": _TOOL_IMAGES_INTRO}]
                parts.extend(self.images)
                self._emit({"role": "user", "content": parts}, None)
            else:
                self.omitted += len(self.images)
            self.images.clear()

    def feed(self, message: Message) -> None:
        cached = wire_entry(message)
        role, wire = cached.role, cached.wire
        images = _parts(cached) if cached.base64_image or cached.images else []
        entry: WireEntry | None = cached  # None: sent changed, not as cached
        if role == "tool":
            call_id = wire.get("tool_call_id")
            if call_id not in self.pending:
                logger.warning(f"Dropping a tool result with no matching tool call ({call_id})")
                return
            self.pending.remove(call_id)
            if images:
                self.images.extend(images)
                if not self.supports_images:
                    note = IMAGE_OMITTED_NOTE.format(model=self.model)
                    wire = {**wire, "content": f"{wire.get('content') or ''}\n{note}"}
                    entry = None
            self._emit(wire, entry)
            return
        if self.pending or self.images:
            self.flush()
        if images:
            if self.supports_images:
                wire = {**wire, "content": _with_images(wire.get("content"), images)}
            else:
                self.omitted += len(images)
                note = IMAGE_OMITTED_NOTE.format(model=self.model)
                wire = {**wire, "content": _append_text(wire.get("content"), note)}
            entry = None
        self._emit(wire, entry)
        if role == "assistant":
            calls = wire.get("tool_calls")
            if calls:
                self.pending.extend(call.get("id") for call in calls)


@dataclass(slots=True, eq=False)
class _Snapshot:
    """A pass's state after ``inputs``: what a later request over them can resume from."""

    inputs: list[Any]
    state: _Pass
    edits: int


def _resumable(snap: Any, messages: list[Any], supports_images: bool, model: str) -> bool:
    if not isinstance(snap, _Snapshot):
        return False
    count = len(snap.inputs)
    return (
        snap.edits == nested_edit_count()
        and snap.state.supports_images == supports_images
        and snap.state.model == model
        and len(messages) >= count
        and messages[:count] == snap.inputs  # identity first: C speed for unchanged messages
    )


def prepare_messages(
    messages: Iterable[Message],
    *,
    system: Sequence[Message] | None = None,
    supports_images: bool = True,
    model: str = "",
) -> Formatted:
    """Wire-format ``system`` then ``messages``, reusing cached work; images become a visible
    note when ``supports_images`` is False."""
    head = _plain_head(system)
    if head is None:  # a system part that needs the whole pass (images, tool results)
        head_pass = _Pass(supports_images, model)
        for raw in system or ():
            head_pass.feed(raw)
        if not head_pass.clean:  # it ends mid-block: format everything in one pass
            for raw in messages:
                head_pass.feed(raw)
            head_pass.flush()
            return head_pass.result()
        head = head_pass.result()
    conversation = messages if isinstance(messages, list) else list(messages)
    work = _Pass(supports_images, model)
    first = conversation[0] if conversation else None
    # The conversation's first message carries the snapshot.
    anchor = wire_entry(first) if first is not None else None
    start = 0
    if anchor is not None:
        snap = anchor.snapshot
        if _resumable(snap, conversation, supports_images, model):
            work = snap.state.copy()
            start = len(snap.inputs)
    last = len(conversation) - 1
    for index in range(start, last + 1):
        if index == last and anchor is not None and index > start:
            anchor.snapshot = _Snapshot(conversation[:index], work.copy(), nested_edit_count())
        work.feed(conversation[index])
    work.flush()
    if not head.messages:
        return work.result()
    return Formatted(
        head.messages + work.out,
        head.entries + work.entries,
        head.fragments + work.fragments,
        head.omitted + work.omitted,
    )


def _plain_head(system: Sequence[Message] | None) -> Formatted | None:
    """The system part when it is plain cached messages (the usual one system prompt, with
    no image and no tool result), without a formatting pass; else None."""
    if not system:
        return Formatted()
    head = Formatted()
    for raw in system:
        entry = wire_entry(raw)
        if entry.base64_image or entry.images or entry.role == "tool" or entry.tool_calls_len > 0:
            return None
        if not isinstance(entry.content, str | None):
            return None
        head.messages.append(entry.wire)
        head.entries.append(entry)
        head.fragments.append(entry.json)
    return head


def _with_images(content: Any, images: list[dict[str, Any]]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = [] if not content else [{"type": "text", "text": content}]
    return parts + images


def _append_text(content: Any, note: str) -> Any:
    return note if not content else f"{content}\n{note}"
