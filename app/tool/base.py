"""The tool contract: what a tool declares to the model and what it hands back."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from app.strict import StrictModel
from app.text import clean_text
from app.tool.declared import schema_of, validate_with
from app.tool.validation import validator_for


class ToolResult(BaseModel):
    """What a tool returns: output for the model, or an error the model can act on: ``error``
    (its text is what the model reads) or ``is_error=True`` with the text in ``output``."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    output: Any = Field(default=None)
    error: str | None = Field(default=None)
    base64_image: str | None = Field(default=None)
    system: str | None = Field(default=None)
    is_error: bool = Field(default=False)

    def __bool__(self) -> bool:
        return any(getattr(self, name) for name in type(self).model_fields)

    def __add__(self, other: ToolResult) -> ToolResult:
        def combine(a: Any, b: Any, concatenate: bool = True) -> Any:
            if a and b:
                if concatenate:
                    return format_output(a) + format_output(b)
                raise ValueError("Cannot combine tool results")
            return a or b

        return type(self)(
            output=combine(self.output, other.output),
            error=combine(self.error, other.error),
            base64_image=combine(self.base64_image, other.base64_image, False),
            system=combine(self.system, other.system),
            is_error=self.is_error or other.is_error,
        )

    def __str__(self) -> str:
        # Always a string, whatever the tool put in ``output`` (upstream could return a dict).
        if self.error:
            return f"Error: {self.error}"
        return format_output(self.output)

    def replace(self, **kwargs: Any) -> ToolResult:
        """A copy with some fields replaced."""
        return self.model_copy(update=kwargs)

    @property
    def failed(self) -> bool:
        """Whether the call failed: a ``ToolFailure``, a result carrying an error, or one
        marked ``is_error``."""
        return self.is_error or isinstance(self, ToolFailure) or bool(self.error)


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """One call as the agent keeps it until it goes into memory: the text for the model, the
    image it produced, and whether it failed (known from the result, never guessed from text).
    """

    text: str
    image: str | None = None
    failed: bool = False


class CLIResult(ToolResult):
    """A result rendered as command-line output."""


class ToolFailure(ToolResult):
    """A result that represents a failure."""


def result_failed(result: Any) -> bool:
    """Whether a tool's return value reports a failure: a failed ``ToolResult`` (the one
    channel; an exception was already turned into one), never guessed from text."""
    return isinstance(result, ToolResult) and result.failed


def format_output(value: Any) -> str:
    """Anything a tool may return as the text the model reads: valid UTF-8, so a lone surrogate
    (a file name, a program's bytes) cannot break the session file, terminal or web page."""
    return clean_text(_render(value))


def _render(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, ToolResult):
        return str(value)
    if isinstance(value, Mapping | list | tuple):
        try:
            return json.dumps(value, ensure_ascii=False, default=str)
        except (TypeError, ValueError):
            return str(value)
    return str(value)


class BaseTool(ABC, StrictModel):
    """A capability the model can call: a name, a description and a JSON schema.

    ``parameters`` is derived from ``Args`` (a ``ToolArgs`` model), which also checks each
    call; a tool without ``Args`` (MCP tools) writes ``parameters`` by hand, checked by
    ``app.tool.validation``. ``execute`` returns a ``ToolResult``, a string or any JSON-able
    value; an exception becomes a failed result the model sees, never a crash.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid", defer_build=True)

    name: str
    description: str
    parameters: dict[str, Any] | None = None
    #: True when calls never change anything another call could observe (reads, lookups):
    #: such calls of one assistant message may then run at the same time.
    concurrency_safe: bool = False

    #: The arguments model: the schema and the check.
    Args: ClassVar[type[BaseModel] | None] = None

    def model_post_init(self, context: Any, /) -> None:
        super().model_post_init(context)
        model = self.arguments_model()
        if model is not None and self.parameters is None:
            self.__dict__["parameters"] = schema_of(model)  # the class's dict, built once

    def arguments_model(self) -> type[BaseModel] | None:
        """The model that declares this tool's arguments (``Args``), if it has one."""
        return type(self).Args

    def validate_arguments(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The model's arguments checked (coerced where lossless) by the arguments model, or by
        ``parameters`` compiled once and found by identity (assign a new dict to change it);
        raises ``ToolArgumentsError`` listing every problem."""
        model = self.arguments_model()
        if model is not None and self.parameters is schema_of(model):
            return validate_with(model, self.name, arguments)
        return validator_for(self.parameters).validate(self.name, arguments)

    def is_concurrency_safe(self, arguments: dict[str, Any]) -> bool:
        """Whether this particular call may run alongside other safe calls; tools whose
        commands differ (read vs. write) decide per call."""
        return self.concurrency_safe

    async def __call__(self, **kwargs: Any) -> Any:
        return await self.execute(**kwargs)

    @abstractmethod
    async def execute(self, *args: Any, **kwargs: Any) -> Any:
        """Run the tool with the model's arguments, as keywords (any signature overrides)."""

    def to_param(self) -> dict[str, Any]:
        """The tool in the OpenAI function-calling format."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters or {"type": "object", "properties": {}},
            },
        }

    def success_response(self, data: Any) -> ToolResult:
        """A successful result; dicts and lists are rendered as JSON text."""
        return ToolResult(output=format_output(data))

    def fail_response(self, msg: str) -> ToolResult:
        """A failed result carrying ``msg`` for the model."""
        return ToolFailure(error=msg)

    async def cleanup(self) -> None:
        """Release what the tool holds (processes, sessions); it must stay usable afterwards."""
        return None
