"""The request pass: a conversation in wire format, repaired, ready to be joined into a body.

Two repairs happen here, at the one place every request passes through:

* images never travel inside ``tool`` messages (the API does not accept them there): an image a
  tool produced is sent in a user message right after the block of tool results;
* a tool result without its assistant call is dropped, and an assistant call without its result
  gets a stub result, so a request is never rejected for an orphaned pair.

An agent sends its whole history at every step, and all but the newest messages were formatted
for the previous request already. So the pass keeps a snapshot of its state after all but the
last message, stored with the conversation's first message; the next request over the same
conversation (the same message objects, in the same order, none edited since) resumes from it
and only formats what is new. Checking the snapshot is a C-level identity compare of the
lists, so a step's cost no longer grows with the history in Python code.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from app.llm.openai.wire import WireEntry, dumps, wire_entry
from app.logger import logger
from app.schema import ROLE_VALUES, Message, nested_edit_count

__all__ = ["IMAGE_OMITTED_NOTE", "Formatted", "image_part", "prepare_messages"]

IMAGE_OMITTED_NOTE = "[an image was omitted here: model '{model}' is not configured for images]"
_TOOL_IMAGES_INTRO = "Image(s) produced by the tool call(s) above:"
_NOT_EXECUTED = "Error: this tool call was not executed (the step was interrupted)."
_WIRE_KEYS = ("role", "content", "tool_calls", "name", "tool_call_id")


def image_part(image: str, detail: str | None = None) -> dict[str, Any]:
    """An ``image_url`` content part from a URL, a data URL or bare base64 data."""
    if image.startswith(("http://", "https://", "data:")):
        url = image
    else:
        url = f"data:{_media_type(image)};base64,{image}"
    part: dict[str, Any] = {"type": "image_url", "image_url": {"url": url}}
    if detail:
        part["image_url"]["detail"] = detail
    return part


def _media_type(b64: str) -> str:
    if b64.startswith("iVBOR"):
        return "image/png"
    if b64.startswith("R0lGOD"):
        return "image/gif"
    if b64.startswith("UklGR"):
        return "image/webp"
    return "image/jpeg"


@dataclass(slots=True)
class Formatted:
    """A request's messages in wire format.

    ``messages`` are the wire dicts (shared with the messages' caches: read-only) and
    ``fragments`` their JSON texts. ``entries[i]`` is the cache entry when ``messages[i]`` is a
    cached message sent unchanged (its token count is then reused), else None. ``omitted``
    counts images left out.
    """

    messages: list[dict[str, Any]] = field(default_factory=list)
    entries: list[WireEntry | None] = field(default_factory=list)
    fragments: list[bytes] = field(default_factory=list)
    omitted: int = 0


class _Snapshot:
    """The pass's state after ``inputs``: what a later request over them can resume from."""

    __slots__ = (
        "edits",
        "entries",
        "fragments",
        "images",
        "inputs",
        "model",
        "omitted",
        "out",
        "pending",
        "supports_images",
    )

    inputs: list[Any]
    out: list[dict[str, Any]]
    entries: list[WireEntry | None]
    fragments: list[bytes]
    pending: tuple[str, ...]
    images: tuple[str, ...]
    omitted: int
    supports_images: bool
    model: str
    edits: int


class _Pass:
    """One formatting pass over messages, appending wire dicts, entries and JSON texts."""

    __slots__ = (
        "entries",
        "fragments",
        "images",
        "model",
        "omitted",
        "out",
        "pending",
        "supports_images",
    )

    def __init__(self, supports_images: bool, model: str) -> None:
        self.supports_images = supports_images
        self.model = model
        self.out: list[dict[str, Any]] = []
        self.entries: list[WireEntry | None] = []
        self.fragments: list[bytes] = []
        self.pending: list[str] = []  # ids of the last assistant's calls not yet answered
        self.images: list[str] = []  # images of the current block of tool results
        self.omitted = 0

    @property
    def clean(self) -> bool:
        return not self.pending and not self.images

    def snapshot(self, inputs: list[Any]) -> _Snapshot:
        snap = _Snapshot()
        snap.inputs = inputs
        snap.out = self.out[:]
        snap.entries = self.entries[:]
        snap.fragments = self.fragments[:]
        snap.pending = tuple(self.pending)
        snap.images = tuple(self.images)
        snap.omitted = self.omitted
        snap.supports_images = self.supports_images
        snap.model = self.model
        snap.edits = nested_edit_count()
        return snap

    def resume(self, snap: _Snapshot) -> None:
        self.out = snap.out[:]
        self.entries = snap.entries[:]
        self.fragments = snap.fragments[:]
        self.pending = list(snap.pending)
        self.images = list(snap.images)
        self.omitted = snap.omitted

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
                parts.extend(image_part(img) for img in self.images)
                self._emit({"role": "user", "content": parts}, None)
            else:
                self.omitted += len(self.images)
            self.images.clear()

    def feed(self, raw: Message | dict[str, Any]) -> None:
        entry: WireEntry | None
        role: str
        if isinstance(raw, Message):
            entry = wire_entry(raw)
            role, wire, image = entry.role, entry.wire, entry.base64_image
        else:
            role, wire, image = _dict_wire(raw)
            entry = None
        if role == "tool":
            call_id = wire.get("tool_call_id")
            if call_id not in self.pending:
                logger.warning(f"Dropping a tool result with no matching tool call ({call_id})")
                return
            self.pending.remove(call_id)
            if image:
                self.images.append(image)
                if not self.supports_images:
                    note = IMAGE_OMITTED_NOTE.format(model=self.model)
                    wire = {**wire, "content": f"{wire.get('content') or ''}\n{note}"}
                    entry = None
            self._emit(wire, entry)
            return
        if self.pending or self.images:
            self.flush()
        if image:
            if self.supports_images:
                wire = {**wire, "content": _with_image(wire.get("content"), image)}
            else:
                self.omitted += 1
                note = IMAGE_OMITTED_NOTE.format(model=self.model)
                wire = {**wire, "content": _append_text(wire.get("content"), note)}
            entry = None
        if not self.supports_images and isinstance(wire.get("content"), list):
            content, dropped = _strip_image_parts(wire["content"], self.model)
            if dropped:
                wire = {**wire, "content": content}
                self.omitted += dropped
                entry = None
        self._emit(wire, entry)
        if role == "assistant":
            calls = wire.get("tool_calls")
            if calls:
                self.pending.extend(call.get("id") for call in calls)


def _dict_wire(msg: Any) -> tuple[str, dict[str, Any], Any]:
    if not isinstance(msg, dict):
        raise TypeError(f"Messages must be Message objects or dicts, not {type(msg).__name__}")
    if "role" not in msg:
        raise ValueError("A message dict must have a 'role' key")
    role = msg["role"]
    role = role.value if hasattr(role, "value") else role
    if role not in ROLE_VALUES:
        raise ValueError(f"Invalid message role: {role!r}")
    keys = _WIRE_KEYS if role == "tool" else msg
    wire = {k: msg[k] for k in keys if k in msg and k != "base64_image" and msg[k] is not None}
    wire["role"] = role
    return role, wire, msg.get("base64_image")


def _resumable(snap: Any, messages: list[Any], supports_images: bool, model: str) -> bool:
    if not isinstance(snap, _Snapshot):
        return False
    count = len(snap.inputs)
    return (
        snap.edits == nested_edit_count()
        and snap.supports_images == supports_images
        and snap.model == model
        and len(messages) >= count
        and messages[:count] == snap.inputs  # identity first: C speed for unchanged messages
    )


def prepare_messages(
    messages: Iterable[Message | dict[str, Any]],
    *,
    system: Iterable[Message | dict[str, Any]] | None = None,
    supports_images: bool = True,
    model: str = "",
) -> Formatted:
    """Wire-format ``system`` then ``messages`` for a request, reusing cached work.

    Images are left out (replaced by a visible note) only when ``supports_images`` is False;
    the caller decides whether that is a warning or an error.
    """
    head = _plain_head(system)
    if head is None:  # a system part that needs the whole pass (dicts, images, tool results)
        head_pass = _Pass(supports_images, model)
        for raw in system or ():
            head_pass.feed(raw)
        if not head_pass.clean:  # it ends mid-block: format everything in one pass
            conversation = messages if isinstance(messages, list) else list(messages)
            return _single_pass([*(system or ()), *conversation], supports_images, model)
        head = Formatted(head_pass.out, head_pass.entries, head_pass.fragments, head_pass.omitted)
    conversation = messages if isinstance(messages, list) else list(messages)
    work = _Pass(supports_images, model)
    first = conversation[0] if conversation else None
    # The conversation's first message carries the snapshot, when it is a cacheable Message.
    anchor = wire_entry(first) if isinstance(first, Message) else None
    start = 0
    if anchor is not None:
        snap = anchor.snapshot
        if _resumable(snap, conversation, supports_images, model):
            work.resume(snap)
            start = len(snap.inputs)
    last = len(conversation) - 1
    cacheable = anchor is not None
    for index in range(start, last + 1):
        raw = conversation[index]
        if index == last and cacheable and index > start:
            anchor.snapshot = work.snapshot(conversation[:index])  # type: ignore[union-attr]
        if cacheable and not isinstance(raw, Message):
            cacheable = False  # a dict in the conversation: nothing to resume from
        work.feed(raw)
    work.flush()
    if not head.messages:
        return Formatted(work.out, work.entries, work.fragments, work.omitted)
    return Formatted(
        head.messages + work.out,
        head.entries + work.entries,
        head.fragments + work.fragments,
        head.omitted + work.omitted,
    )


def _plain_head(system: Iterable[Message | dict[str, Any]] | None) -> Formatted | None:
    """The system part when it is plain cached messages (the usual one system prompt, with
    no image and no tool result), without a formatting pass; else None."""
    if not system:
        return Formatted()
    if not isinstance(system, list | tuple):
        return None
    head = Formatted()
    for raw in system:
        if not isinstance(raw, Message):
            return None
        entry = wire_entry(raw)
        if entry.base64_image or entry.role == "tool" or entry.tool_calls_len > 0:
            return None
        if not isinstance(entry.content, str | None):
            return None
        head.messages.append(entry.wire)
        head.entries.append(entry)
        head.fragments.append(entry.json)
    return head


def _single_pass(messages: list[Any], supports_images: bool, model: str) -> Formatted:
    work = _Pass(supports_images, model)
    for raw in messages:
        work.feed(raw)
    work.flush()
    return Formatted(work.out, work.entries, work.fragments, work.omitted)


def _with_image(content: Any, image: str) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]]
    if content is None or content == "":
        parts = []
    elif isinstance(content, str):
        parts = [{"type": "text", "text": content}]
    else:
        parts = list(content)
    parts.append(image_part(image))
    return parts


def _append_text(content: Any, note: str) -> Any:
    if content is None or content == "":
        return note
    if isinstance(content, str):
        return f"{content}\n{note}"
    return [*content, {"type": "text", "text": note}]


def _strip_image_parts(parts: list[Any], model: str) -> tuple[list[Any], int]:
    kept, dropped = [], 0
    for part in parts:
        if isinstance(part, dict) and part.get("type") == "image_url":
            dropped += 1
            kept.append({"type": "text", "text": IMAGE_OMITTED_NOTE.format(model=model)})
        else:
            kept.append(part)
    return kept, dropped
