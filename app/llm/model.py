"""The model seam: what a chat model is to everything above ``app.llm``.

A model is anything with a ``name`` and one async method,
``request(messages, params) -> ModelResponse``, on our typed :class:`~app.schema.Message`:
a wire API (``app.llm.openai``, ``app.llm.bedrock``, ``app.llm.anthropic``), an in-process
function (:class:`app.testing.FunctionModel`), a test double (:class:`app.testing.TestModel`)
or a user's own class. Agents and flows take one as ``model=`` (``LLM.from_model`` puts
upstream's ``ask*`` facade, usage and token counting on top).

A model may also offer two optional capabilities, used when present: ``count_tokens``
(:class:`CountsTokens`: count a request in its own wire format; without it the facade
estimates over our types) and ``aclose()`` (release connections). One request is one
attempt: retries, the rate gate and recording are wrappers around every model
(``app.llm.stack``); a model that must remember something from one attempt of a request to
the next keeps it in ``params.attempt`` (:class:`Attempt`).

The usage of a call travels with its response instead of through shared mutable state, so
concurrent callers never see each other's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from app.llm.usage import Usage
from app.schema import Message

if TYPE_CHECKING:
    from app.tokens import TokenCounter

#: ``finish_reason`` values the OpenAI API defines; servers may send others (kept verbatim).
FINISH_REASONS = ("stop", "length", "tool_calls", "content_filter", "function_call")

#: Receives each piece of the model's text as it is written; may be a coroutine function.
DeltaCallback = Callable[[str], Awaitable[None] | None]


@dataclass(slots=True)
class ModelResponse:
    """One model turn: the assistant message, what it cost, and why it ended.

    ``finish_reason`` is None when the server did not say. ``reasoning`` holds the model's
    reasoning text (``reasoning_content`` or ``<think>`` blocks), never part of ``message``.
    """

    message: Message
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None
    reasoning: str | None = None

    @property
    def truncated(self) -> bool:
        """The answer was cut at the token limit (it is not a complete answer)."""
        return self.finish_reason == "length"


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """A tool as a model sees it: its name, what it does, and a JSON schema of its arguments."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object"})
    #: The param it was read from (``from_param``), sent as given: extra keys kept.
    source: dict[str, Any] | None = field(default=None, compare=False, repr=False)

    @classmethod
    def from_param(cls, param: dict[str, Any]) -> ToolDefinition:
        """From the ``{"type": "function", "function": {...}}`` form tools are offered in."""
        inner = param.get("function")
        fn: dict[str, Any] = inner if isinstance(inner, dict) else param
        parameters = fn.get("parameters")
        return cls(
            name=str(fn.get("name") or ""),
            description=str(fn.get("description") or ""),
            parameters=parameters if isinstance(parameters, dict) else {"type": "object"},
            source=param,
        )

    def to_param(self) -> dict[str, Any]:
        """The ``{"type": "function", ...}`` form of the chat-completions API."""
        if self.source is not None:
            return self.source
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


class Attempt:
    """The attempts of one request, as the retry wrapper makes them (``number`` 1 first).

    A wire model keeps what one attempt teaches the next in ``memo`` (keyed by itself): a
    plain request that timed out is retried streamed, say. Setting ``final`` makes the error
    the attempt raises the last one (a timed-out plain request is asked again once only).
    """

    __slots__ = ("final", "memo", "number")

    def __init__(self) -> None:
        self.number = 1
        self.memo: dict[object, Any] = {}
        self.final = False


@dataclass(slots=True)
class ModelParams:
    """Everything about one request besides the messages.

    ``tool_choice`` is ``"auto"``, ``"none"``, ``"required"`` or
    ``{"type": "function", "function": {"name": ...}}``. ``on_delta``, when set, asks for the
    answer's text piece by piece as it is written (a model that cannot stream hands it over in
    one piece). ``max_tokens`` and ``temperature`` of None leave the model's own settings.
    ``stream`` True or False asks for a streamed or a plain request where the model has the
    choice (None: its own policy); ``extra`` holds further request fields (``seed``, ``stop``)
    for models that understand them. ``attempt`` is set by the retry wrapper (None when the
    model is called directly: a single attempt).
    """

    tools: Sequence[ToolDefinition] = ()
    tool_choice: str | dict[str, Any] = "auto"
    max_tokens: int | None = None
    temperature: float | None = None
    timeout: float | None = None
    on_delta: DeltaCallback | None = None
    stream: bool | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    attempt: Attempt | None = None


@runtime_checkable
class Model(Protocol):
    """A chat model: ``name`` for logs, usage and pricing, and one request method.

    ``messages`` start with the system prompt when there is one; tool results are
    ``role="tool"`` messages answering the assistant's ``tool_calls`` by id. Raise
    ``app.exceptions.LLMTransientError`` (or a subclass) for a failure worth retrying and
    another ``LLMError`` for one that is not (``ContextWindowExceededError`` for a request
    too long); any other exception is a bug and ends the run. Make one attempt: the
    wrappers retry.
    """

    name: str

    async def request(self, messages: Sequence[Message], params: ModelParams) -> ModelResponse:
        """One model turn."""
        ...


@runtime_checkable
class CountsTokens(Protocol):
    """Optional: a model that counts a request's input tokens in its own wire format (the
    OpenAI model counts its cached wire messages). ``counter`` is loaded; counting must not
    block (no network). Without it, the facade estimates over our types
    (``app.llm.counting``)."""

    def count_tokens(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        counter: TokenCounter,
    ) -> int:
        """Input tokens of a request over ``messages`` and ``tools``."""
        ...
