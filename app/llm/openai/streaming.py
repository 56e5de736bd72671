"""Reading a streamed chat completion into the shape of a non-streamed one; every streaming
transport uses :class:`StreamAssembler`, so a malformed chunk is an ``LLMResponseError`` here."""

from __future__ import annotations

from typing import Any

from app.exceptions import LLMError, LLMResponseError
from app.llm.arguments import loads_safely
from app.text import clean_text


class StreamAssembler:
    """Collects chat-completion chunks into one completion dict. Tool calls are keyed by
    ``index`` (arguments come in pieces, or whole as an object); a stream that ends without
    ``[DONE]`` (``done``) or a ``finish_reason`` was cut short."""

    __slots__ = ("calls", "chunks", "done", "finish_reason", "model", "parts", "reasoning", "usage")

    def __init__(self, model: str = "") -> None:
        self.model = model
        self.parts: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.chunks = 0
        self.done = False

    @property
    def complete(self) -> bool:
        return self.done or self.finish_reason is not None

    def _bad(self, what: str) -> LLMResponseError:
        return LLMResponseError(
            f"Model '{self.model}' streamed a malformed chunk: {what}", model=self.model
        )

    def add_payload(self, payload: str) -> str | None:
        """Take one ``data:`` payload of the event stream; returns its text delta, if any."""
        if payload == "[DONE]":
            self.done = True
            return None
        try:
            chunk = loads_safely(payload)
        except ValueError as e:
            raise LLMResponseError(
                f"Model '{self.model}' streamed invalid JSON ({e}): {payload[:200]!r}",
                model=self.model,
            ) from e
        return self.add(chunk)

    def add(self, chunk: Any) -> str | None:
        """Take one chunk; returns its text delta, if any."""
        if not isinstance(chunk, dict):
            raise self._bad(f"expected an object, got {type(chunk).__name__}")
        self.chunks += 1
        if chunk.get("error"):
            raise _stream_error(chunk["error"], self.model)
        usage = chunk.get("usage")
        if isinstance(usage, dict) and usage:
            self.usage = usage
        choices = chunk.get("choices")
        if choices is None:
            return None
        if not isinstance(choices, list):
            raise self._bad(f"'choices' is a {type(choices).__name__}, not a list")
        text: str | None = None
        for choice in choices:
            if not isinstance(choice, dict):
                raise self._bad("a choice is not an object")
            if choice.get("index", 0) not in (0, None):
                continue
            delta = choice.get("delta") or choice.get("message") or {}
            if not isinstance(delta, dict):
                raise self._bad("'delta' is not an object")
            piece = delta.get("content")
            if piece is not None and not isinstance(piece, str):
                raise self._bad(f"'content' is a {type(piece).__name__}, not text")
            if piece:
                self.parts.append(piece)
                text = piece if text is None else text + piece
            thought = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(thought, str) and thought:
                self.reasoning.append(thought)
            calls = delta.get("tool_calls")
            if calls is not None:
                if not isinstance(calls, list):
                    raise self._bad(f"'tool_calls' is a {type(calls).__name__}, not a list")
                for call in calls:
                    self._add_call(call)
            legacy = delta.get("function_call")
            if isinstance(legacy, dict) and not calls:
                self._add_call({"index": 0, "function": legacy, "legacy": True})
            finish = choice.get("finish_reason")
            if isinstance(finish, str) and finish:
                self.finish_reason = finish
        # The piece goes out at once (the SDK decoded it, not us): valid UTF-8 only.
        return clean_text(text) if text else text

    def _add_call(self, call: Any) -> None:
        if not isinstance(call, dict):
            raise self._bad("a tool call is not an object")
        index = call.get("index")
        if not isinstance(index, int) or isinstance(index, bool):
            index = len(self.calls)
        entry = self.calls.setdefault(
            index, {"id": None, "type": "function", "name": "", "arguments": []}
        )
        for key in ("id", "type"):
            if isinstance(call.get(key), str) and call[key]:
                entry[key] = call[key]
        function = call.get("function") or {}
        if not isinstance(function, dict):
            raise self._bad("a tool call's 'function' is not an object")
        name = function.get("name")
        if name is not None and not isinstance(name, str):
            raise self._bad("a tool call's name is not text")
        if name and not entry["name"].endswith(name):
            entry["name"] += name
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            if isinstance(entry["arguments"], list):
                entry["arguments"].append(arguments)
        elif arguments is not None:
            entry["arguments"] = arguments  # a whole JSON object

    def completion(self) -> dict[str, Any]:
        """The turn as a non-streamed completion body."""
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.parts) or None}
        if self.reasoning:
            message["reasoning_content"] = "".join(self.reasoning)
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
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish_reason}],
        }
        if self.usage:
            data["usage"] = self.usage
        return data


def _stream_error(detail: Any, model: str) -> LLMError:
    """An ``error`` event inside a stream (llama.cpp reports a context overflow this way)."""
    from app.llm.openai.errors import error_from_response  # on an error only: ~8 ms at start-up

    code = detail.get("code") if isinstance(detail, dict) else None
    if isinstance(code, int) and not isinstance(code, bool) and 400 <= code <= 599:
        return error_from_response(code, {"error": detail}, None, model=model)
    message = detail.get("message") if isinstance(detail, dict) else detail
    return LLMResponseError(f"Model '{model}' reported an error mid-stream: {message}", model=model)


class ThinkFilter:
    """Keeps a leading ``<think>...</think>`` block out of the text shown while streaming
    (the block is reasoning: it goes to ``ModelResponse.reasoning``, not to the answer)."""

    __slots__ = ("_buffer", "_state")

    _OPEN = "<think>"
    _CLOSE = "</think>"

    def __init__(self) -> None:
        self._state = "start"  # start -> (thinking ->) answer
        self._buffer = ""

    def feed(self, piece: str) -> str:
        """The part of ``piece`` that belongs to the answer."""
        if self._state == "answer":
            return piece
        self._buffer += piece
        if self._state == "start":
            head = self._buffer.lstrip()
            if not head:
                return ""
            if len(head) < len(self._OPEN) and self._OPEN.startswith(head):
                return ""  # could still become "<think>"
            if not head.startswith(self._OPEN):
                self._state = "answer"
                out, self._buffer = self._buffer, ""
                return out
            self._state = "thinking"
        end = self._buffer.find(self._CLOSE)
        if end < 0:
            return ""
        rest = self._buffer[end + len(self._CLOSE) :].lstrip()
        self._state = "answer"
        self._buffer = ""
        return rest
