"""The one redactor for every outward channel (terminal, events, web UI, AG-UI, A2A, traces,
sessions): configured secrets in any encoding, and anything shaped like a credential, replaced
by ``***``; the result is valid UTF-8 (a lone surrogate cannot be sent or printed).

Only what leaves the process is redacted: the model's own inputs keep what they were given.
Text that arrives in pieces (a streamed answer) goes through :class:`StreamRedactor` (or
:class:`EventRedactor` for events), so a secret split across two pieces is still caught.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import Any, TypeVar

from app.logger import (
    MIN_SECRET_LENGTH,
    redact,
    redact_registered,
    registered_secrets,
    secret_forms,
)
from app.text import clean_text

E = TypeVar("E")


def redact_text(text: str, max_chars: int | None = None, *, registered_only: bool = False) -> str:
    """``text`` redacted and cleaned; cut to ``max_chars`` with a note when longer.

    ``registered_only``: only the registered secrets (every encoding) go, credential-shaped
    text stays: for session files, which are the conversation a resumed model reads back (a
    ``password = input()`` it wrote must come back as written)."""
    cleaned = clean_text(redact_registered(text) if registered_only else redact(text))
    if max_chars is not None and len(cleaned) > max_chars:
        return cleaned[:max_chars] + "\n…(cut)"
    return cleaned


def redact_tree(value: Any, max_chars: int | None = None, *, registered_only: bool = False) -> Any:
    """``value`` with every string redacted (dicts, lists and tuples walked; keys too);
    ``registered_only`` as for :func:`redact_text`."""
    if isinstance(value, str):
        return redact_text(value, max_chars, registered_only=registered_only)
    if isinstance(value, dict):
        return {
            redact_text(str(k), registered_only=registered_only): redact_tree(
                v, max_chars, registered_only=registered_only
            )
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact_tree(v, max_chars, registered_only=registered_only) for v in value]
    return value


def redact_event(event: E) -> E:
    """A (dataclass) event with every text field redacted, lists and dicts walked; fields
    marked ``transient`` (live objects, never rendered) are left as they are. The same object
    when nothing changed."""
    if not dataclasses.is_dataclass(event) or isinstance(event, type):
        raise TypeError(f"redact_event needs a dataclass instance, not {type(event).__name__}")
    changes: dict[str, Any] = {}
    for item in dataclasses.fields(event):
        if item.metadata.get("transient") or not item.init:
            continue
        value = getattr(event, item.name)
        if isinstance(value, str | list | tuple | dict):
            redacted = redact_tree(value)
            if isinstance(value, tuple):
                redacted = tuple(redacted)
            if redacted != value:
                changes[item.name] = redacted
    return dataclasses.replace(event, **changes) if changes else event


# ---- streamed text -------------------------------------------------------------------------

#: Put after the text in hand to see whether what follows could still turn part of it into a
#: credential: a token completing every shape the logger knows (``sk-…``, ``Bearer …``,
#: ``user:password@host``), and the same after ``=`` (``api_key `` now, ``= value`` next).
_PROBES = ("Zq7" * 8 + "@h", "=" + "Zq7" * 8 + "@h")
#: Where text may be cut: after whitespace, before a word (a word being written is held).
_CUTS = re.compile(r"(?<=\s)(?=\S)|(?<=\s)\Z")
#: Held text longer than this is cut inside its last word too (a base64 blob streamed without
#: a space), where no secret can straddle the cut.
_HOLD_LIMIT = 8192
#: How many cut points are tried before everything in hand is held for the next piece.
_MAX_TRIES = 64


@functools.lru_cache(maxsize=8)
def _prefixes(secrets: frozenset[str]) -> tuple[frozenset[str], int]:
    """Every proper prefix of every registered form, and the longest form's length."""
    forms = {f for s in secrets for f in secret_forms(s) if len(f) >= MIN_SECRET_LENGTH}
    prefixes = frozenset(f[:k] for f in forms for k in range(1, len(f)))
    return prefixes, max((len(f) for f in forms), default=0)


class StreamRedactor:
    """Redacts text that arrives in pieces as if it came whole: what the next piece could
    still make (part of) a secret is held back, the rest is given out at once.

    >>> stream = StreamRedactor()
    >>> stream.feed("my key is sk-abcdefgh") + stream.feed("ijklmnopqrst, done") + stream.flush()
    'my key is ***, done'
    """

    def __init__(self) -> None:
        self._held = ""

    def feed(self, piece: str) -> str:
        """The redacted text that is safe to give out now (often all of it, maybe none)."""
        text = self._held + piece
        cut = self._cut(text)
        self._held = text[cut:]
        return redact_text(text[:cut]) if cut else ""

    def flush(self) -> str:
        """The stream ended: everything still held, redacted."""
        text, self._held = self._held, ""
        return redact_text(text) if text else ""

    def _cut(self, text: str) -> int:
        """The last point (before a word, or the end after a space) where the redaction of
        the text before it cannot depend on anything after it."""
        prefixes, longest = _prefixes(registered_secrets())
        wholes = [redact(text + probe) for probe in _PROBES]
        cuts = [m.start() for m in _CUTS.finditer(text)]
        if len(text) - max(cuts, default=0) > _HOLD_LIMIT:  # one long word: cut inside it too
            step = max(256, 2 * longest)
            cuts += range(len(text) - step, len(text) - _HOLD_LIMIT - step, -step)
        for cut in sorted(set(cuts), reverse=True)[:_MAX_TRIES]:
            head, rest = text[:cut], text[cut:]
            split = redact(head)
            probed = zip(_PROBES, wholes, strict=True)
            if any(split + redact(rest + probe) != whole for probe, whole in probed):
                continue  # a secret (or a credential's name and its value) spans the cut
            if not _may_straddle(head, rest, prefixes, longest):
                return cut
        return 0


def _may_straddle(head: str, rest: str, prefixes: frozenset[str], longest: int) -> bool:
    """Whether ``head`` ends with the start of a registered form (in any encoding) that
    ``rest`` and the text still to come could complete."""
    for k in range(1, min(len(head), longest - 1 - len(rest)) + 1):
        if head[-k:] + rest in prefixes:
            return True
    return False


class EventRedactor:
    """Events on their way out of the process: each redacted (:func:`redact_event`), and the
    pieces of a streamed text (``delta``, an event type with ``source``, ``step`` and
    ``text``) redacted as one text per source and step. What a stream holds back is given
    out, as one more piece, before the next event of its source.

    One per channel (the terminal, each web session): it holds the streams' state.
    ``fields=False`` leaves the other events as they are, for a channel that redacts
    everything it sends anyway (the web event log) and only needs the streams joined."""

    def __init__(self, delta: type[Any], *, fields: bool = True) -> None:
        self.delta = delta
        self.fields = fields
        #: (source, step) -> the stream and its last piece (the template for what it held).
        self._streams: dict[tuple[str, int], tuple[StreamRedactor, Any]] = {}

    def __call__(self, event: E) -> list[E]:
        """What to send for ``event``: none, one or two events."""
        source = getattr(event, "source", "")
        if isinstance(event, self.delta):
            key = (source, getattr(event, "step", 0))
            out: list[E] = self.flush(source, keep=key)
            stream = self._streams.get(key, (StreamRedactor(), event))[0]
            self._streams[key] = (stream, event)
            text = stream.feed(getattr(event, "text", ""))
            if text:
                out.append(dataclasses.replace(event, text=text))
            return out
        return [*self.flush(source), redact_event(event) if self.fields else event]

    def flush(self, source: str, keep: tuple[str, int] | None = None) -> list[Any]:
        """End the streams of ``source`` (but ``keep``): the pieces they held."""
        out = []
        for key in [k for k in self._streams if k[0] == source and k != keep]:
            stream, last = self._streams.pop(key)
            text = stream.flush()
            if text:
                out.append(dataclasses.replace(last, text=text))
        return out
