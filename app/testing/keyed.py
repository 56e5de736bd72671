"""Per-task scripts for the scripted server: many agents at once, each with its own story.

A batch runs hundreds of agents in whatever order the scheduler picks, so one shared script
cannot say which reply is whose. ``KeyedScripts`` finds a request's task (by default its first
user message) and answers from that task's script, by turn (the same request always gets the
same reply, so a rerun replays from the start) or, with ``by="order"``, by consumption.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from app.testing.replies import Reply, coerce_reply, error
from app.testing.scripted import ScriptedLLMServer
from app.testing.wire import CapturedRequest

KeyFunction = Callable[[CapturedRequest], str | None]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def request_prompt(request: CapturedRequest) -> str | None:
    """The first user message of the conversation: the task's prompt."""
    for message in request.messages:
        if isinstance(message, dict) and message.get("role") == "user":
            return _text(message.get("content"))
    return None


class KeyedScripts:
    """A responder with one script per key; give it to ``ScriptedLLMServer(responder=...)``.

    ``key`` is ``"prompt"`` (the first user message), ``"header:<name>"`` (a request
    header), or a function of the request. A prompt that matches no key exactly is matched
    to the longest key it contains, so wrappers around the prompt (a flow's step
    instructions) still find their script. Unknown keys get ``fallback`` if given, else
    HTTP 400 naming the key.
    """

    def __init__(
        self,
        scripts: Mapping[str, Sequence[Reply | str | Mapping[str, Any]]],
        *,
        key: str | KeyFunction = "prompt",
        by: Literal["turn", "order"] = "turn",
        fallback: Reply | str | None = None,
    ) -> None:
        if by not in ("turn", "order"):
            raise ValueError(f"by must be 'turn' or 'order', not {by!r}")
        self.scripts: dict[str, list[Reply]] = {
            k: [coerce_reply(r) for r in replies] for k, replies in scripts.items()
        }
        self._by_length = sorted(self.scripts, key=len, reverse=True)
        self.key = self._key_function(key)
        self.by = by
        self.fallback = coerce_reply(fallback) if fallback is not None else None
        self._lock = threading.Lock()
        #: requests answered per key (thread-safe snapshot: ``dict(counts)``)
        self.counts: Counter[str] = Counter()

    @staticmethod
    def _key_function(key: str | KeyFunction) -> KeyFunction:
        if callable(key):
            return key
        if key == "prompt":
            return request_prompt
        if key.startswith("header:"):
            name = key.partition(":")[2].strip().lower()
            return lambda request: request.headers.get(name)
        raise ValueError(f"key must be 'prompt', 'header:<name>' or a function, not {key!r}")

    def _script_key(self, raw: str | None) -> str | None:
        if raw is None:
            return None
        if raw in self.scripts:
            return raw
        return next((k for k in self._by_length if k and k in raw), None)

    def __call__(self, request: CapturedRequest) -> Reply:
        raw = self.key(request)
        key = self._script_key(raw)
        if key is None:
            if self.fallback is not None:
                return self.fallback
            return error(
                400, f"scripted server: no script for key {str(raw)[:200]!r}", code="no_script"
            )
        script = self.scripts[key]
        with self._lock:
            position = self.counts[key]
            self.counts[key] += 1
        if self.by == "turn":
            position = sum(
                1 for m in request.messages if isinstance(m, dict) and m.get("role") == "assistant"
            )
        if position >= len(script):
            return error(
                400,
                f"scripted server: the script for {key[:80]!r} has "
                f"{len(script)} replies; none left for reply {position + 1}",
                code="script_exhausted",
            )
        return script[position]


def keyed_server(
    scripts: Mapping[str, Sequence[Reply | str | Mapping[str, Any]]], **options: Any
) -> ScriptedLLMServer:
    """A (not yet started) server answering from per-task scripts; ``options`` go to
    :class:`KeyedScripts` (``key``, ``by``, ``fallback``) or the server (``host``, ``port``,
    ``model``, ``on_request``)."""
    keyed_names = {"key", "by", "fallback"}
    keyed = {k: v for k, v in options.items() if k in keyed_names}
    server = {k: v for k, v in options.items() if k not in keyed_names}
    return ScriptedLLMServer(responder=KeyedScripts(scripts, **keyed), **server)
