"""Messages, tool calls, agent states and the conversation memory, with upstream's names and
constructors. Memory trimming drops whole turns: the API rejects orphaned ``tool`` messages.
"""

from __future__ import annotations

import json
import uuid
from enum import Enum
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field


class Role(str, Enum):
    """Who wrote a message."""

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


ROLE_VALUES = tuple(role.value for role in Role)
ROLE_TYPE = Literal["system", "user", "assistant", "tool"]


class ToolChoice(str, Enum):
    """How the model may use tools: never, when it wants, or on every turn."""

    NONE = "none"
    AUTO = "auto"
    REQUIRED = "required"


TOOL_CHOICE_VALUES = tuple(choice.value for choice in ToolChoice)
TOOL_CHOICE_TYPE = Literal["none", "auto", "required"]


class AgentState(str, Enum):
    """Lifecycle of an agent run; FINISHED and ERROR stay visible after ``run()`` returns."""

    IDLE = "IDLE"
    RUNNING = "RUNNING"
    FINISHED = "FINISHED"
    ERROR = "ERROR"


class _Edits:
    """Counts field assignments to messages and tool calls: request formatting caches stamped
    with it tell with one integer compare that nothing was edited since."""

    count = 0


def nested_edit_count() -> int:
    """How many times a field of a ``Message``, ``ToolCall`` or ``Function`` was assigned."""
    return _Edits.count


class Function(BaseModel):
    """The function part of a tool call; ``arguments`` is the model's JSON text."""

    name: str
    arguments: str = ""

    def __setattr__(self, name: str, value: Any) -> None:
        _Edits.count += 1
        super().__setattr__(name, value)


class ToolCall(BaseModel):
    """One function call requested by the model."""

    id: str
    type: str = "function"
    function: Function

    @classmethod
    def function_call(
        cls, name: str, arguments: dict[str, Any] | str | None = None, *, id: str | None = None
    ) -> ToolCall:
        """A call of tool ``name``, as a model of your own writes one: ``arguments`` as a dict
        (encoded to JSON here) or as JSON text; the id is generated unless given."""
        text = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
        call_id = id or f"call_{uuid.uuid4().hex[:24]}"
        return cls(id=call_id, function=Function(name=name, arguments=text))

    def __setattr__(self, name: str, value: Any) -> None:
        _Edits.count += 1
        super().__setattr__(name, value)


class ThinkingBlock(BaseModel):
    """A block of the model's own reasoning that must go back to it unchanged on the next turn
    (Anthropic's ``thinking`` and ``redacted_thinking``, Bedrock's ``reasoningContent``): the
    APIs check the ``signature`` (or the opaque ``data`` of a redacted block). ``provider``
    says whose it is; another provider's blocks are not sent."""

    provider: str
    text: str = ""
    signature: str | None = None
    #: A redacted block's opaque payload (its ``text`` is empty).
    data: str | None = None

    @property
    def redacted(self) -> bool:
        return self.data is not None


class ImagePart(BaseModel):
    """An image in a message beside ``base64_image`` (``ask_with_images`` attaches several):
    a ``data:`` URL, an ``http(s)`` URL (for models that fetch it), or bare base64. ``detail``
    is a hint some APIs take (``low``, ``high``, ``auto``)."""

    url: str
    detail: str | None = None


class Message(BaseModel):
    """One chat message; ``to_dict`` gives the OpenAI wire format without ``None`` fields."""

    role: ROLE_TYPE = Field(...)
    content: str | None = Field(default=None)
    tool_calls: list[ToolCall] | None = Field(default=None)
    name: str | None = Field(default=None)
    tool_call_id: str | None = Field(default=None)
    base64_image: str | None = Field(default=None)
    #: A tool message reporting a failure (never sent to the model: the text says so).
    is_error: bool = Field(default=False)
    #: The reasoning blocks of an assistant turn, kept to be sent back as they came.
    thinking_blocks: list[ThinkingBlock] | None = Field(default=None)
    #: Images besides ``base64_image`` (never stored in sessions: their size).
    images: list[ImagePart] | None = Field(default=None)

    # A slot for the wire form, encoded once (app.llm.openai.wire; checked against the fields on
    # every use). Not a PrivateAttr: those make every Message creation ~3x slower, and a slot
    # is not copied or pickled with the message, which is right for a cache.
    __slots__ = ("_wire",)
    if TYPE_CHECKING:
        _wire: Any

    def __setattr__(self, name: str, value: Any) -> None:
        _Edits.count += 1
        super().__setattr__(name, value)

    def __eq__(self, other: object) -> bool:
        # Fields only: whether a message's wire form is cached does not change what it says.
        if not isinstance(other, Message):
            return NotImplemented
        return (
            type(self) is type(other)
            and self.__dict__ == other.__dict__
            and self.__pydantic_extra__ == other.__pydantic_extra__
        )

    __hash__ = None  # type: ignore[assignment]  # mutable, like every pydantic model

    # Anything else: NotImplemented, and Python raises upstream's "unsupported operand" error.
    def __add__(self, other: Message | list[Message]) -> list[Message]:
        if isinstance(other, list):
            return [self, *other]
        return [self, other] if isinstance(other, Message) else NotImplemented

    def __radd__(self, other: list[Message]) -> list[Message]:
        return [*other, self] if isinstance(other, list) else NotImplemented

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"role": self.role}
        for key in ("content", "tool_calls", "name", "tool_call_id", "base64_image"):
            if (value := getattr(self, key)) is not None:
                data[key] = value
        if self.tool_calls is not None:  # same place in the dict, as plain dicts
            data["tool_calls"] = [call.model_dump() for call in self.tool_calls]
        if self.is_error:
            data["is_error"] = True
        if self.thinking_blocks:
            data["thinking_blocks"] = [block.model_dump() for block in self.thinking_blocks]
        if self.images:
            data["images"] = [image.model_dump(exclude_none=True) for image in self.images]
        return data

    @classmethod
    def user_message(cls, content: str, base64_image: str | None = None) -> Message:
        return cls(role=Role.USER.value, content=content, base64_image=base64_image)

    @classmethod
    def system_message(cls, content: str) -> Message:
        return cls(role=Role.SYSTEM.value, content=content)

    @classmethod
    def assistant_message(
        cls, content: str | None = None, base64_image: str | None = None
    ) -> Message:
        return cls(role=Role.ASSISTANT.value, content=content, base64_image=base64_image)

    @classmethod
    def tool_message(
        cls,
        content: str,
        name: str,
        tool_call_id: str,
        base64_image: str | None = None,
        *,
        is_error: bool = False,
    ) -> Message:
        return cls(
            role=Role.TOOL.value,
            content=content,
            name=name,
            tool_call_id=tool_call_id,
            base64_image=base64_image,
            is_error=is_error,
        )

    @classmethod
    def from_tool_calls(
        cls,
        tool_calls: list[Any],
        content: str | list[str] | None = "",
        base64_image: str | None = None,
        **kwargs: Any,
    ) -> Message:
        """An assistant message carrying ``tool_calls``: our ``ToolCall`` objects, the openai
        SDK's tool-call objects, or plain dicts."""
        if isinstance(content, list):
            content = "\n".join(content)
        calls = [_coerce_tool_call(call) for call in tool_calls]
        return cls(
            role="assistant", content=content, tool_calls=calls, base64_image=base64_image, **kwargs
        )


def _coerce_tool_call(call: Any) -> ToolCall:
    if isinstance(call, ToolCall):
        return call
    if isinstance(call, dict):
        fn = call.get("function") or {}
        return ToolCall(
            id=str(call.get("id") or ""),
            type=call.get("type") or "function",
            function=Function(name=fn.get("name") or "", arguments=_args_text(fn.get("arguments"))),
        )
    fn = call.function
    return ToolCall(
        id=str(call.id),
        type=getattr(call, "type", None) or "function",
        function=Function(name=fn.name, arguments=_args_text(fn.arguments)),
    )


def _args_text(arguments: Any) -> str:
    if arguments is None:
        return ""
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, ensure_ascii=False)


class Memory(BaseModel):
    """The agent's conversation, bounded by ``max_messages``: the oldest turns are dropped
    whole (system messages kept), so no ``tool`` message is ever orphaned."""

    messages: list[Message] = []  # copied per instance by pydantic
    max_messages: int = Field(default=100)

    def add_message(self, message: Message) -> None:
        self.add_messages([message])

    def add_messages(self, messages: list[Message]) -> None:
        self.messages.extend(messages)
        if len(self.messages) > self.max_messages:
            self._trim()

    def clear(self) -> None:
        self.messages.clear()

    def get_recent_messages(self, n: int) -> list[Message]:
        return self.messages[-n:] if n > 0 else []

    def to_dict_list(self) -> list[dict[str, Any]]:
        return [msg.to_dict() for msg in self.messages]

    def _trim(self) -> None:
        system = [m for m in self.messages if m.role == "system"]
        rest = [m for m in self.messages if m.role != "system"]
        budget = max(self.max_messages - len(system), 0)
        # Trim a little below the bound: once per several additions rather than every one.
        slack = max(1, self.max_messages // 10)
        target = max(budget - slack, 0) if len(rest) > budget else budget
        start = len(rest) - target
        # Move the cut forward to a turn boundary: no tool message without its assistant's.
        while start < len(rest) and rest[start].role == "tool":
            start += 1
        if start >= len(rest) and rest:
            # The newest turn alone exceeds the budget; keep that whole turn rather than break it.
            start = _last_turn_start(rest)
        self.messages = system + rest[start:]


def _last_turn_start(messages: list[Message]) -> int:
    index = len(messages) - 1
    while index > 0 and messages[index].role == "tool":
        index -= 1
    return index
