"""The tool contract: what a tool declares to the model and what it hands back."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from app.strict import StrictModel
from app.text import clean_text
from app.tool.declared import schema_of, validate_with
from app.tool.validation import validator_for


class ToolResult(BaseModel):
    """What a tool returns: output for the model, or a failure the model can act on: ``error``
    (its text is what the model reads) or ``is_error=True`` with the text in ``output``.
    Whether it failed is :func:`result_failed`'s to say (``failed`` asks it)."""

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
        """Whether the call failed (see :func:`result_failed`)."""
        return result_failed(self)


class CLIResult(ToolResult):
    """A result rendered as command-line output."""


class ToolFailure(ToolResult):
    """A result that represents a failure (upstream's name; flagged ``is_error``)."""

    is_error: bool = Field(default=True)


def result_failed(value: Any) -> bool:
    """Whether a tool's return value reports a failure: the one check, used wherever a
    decision depends on it. A failure is a ``ToolResult`` marked ``is_error``, carrying an
    ``error`` or of upstream's ``ToolFailure`` type, or upstream's ``{"success": False}``
    dict; never guessed from text. (A raised ``ToolError`` becomes a failed result at the
    edge, ``app.tool.tool_collection.call_tool``.)"""
    if isinstance(value, ToolResult):
        return value.is_error or bool(value.error) or isinstance(value, ToolFailure)
    return type(value) is dict and value.get("success") is False


def as_tool_result(value: Any) -> ToolResult:
    """Whatever a tool returned, as a ``ToolResult`` whose ``is_error`` says whether it
    failed (a subclass, such as an MCP result, keeps its type and extra fields)."""
    failed = result_failed(value)
    if isinstance(value, ToolResult):
        return value if value.is_error == failed else value.replace(is_error=failed)
    return ToolResult(output=value, is_error=True) if failed else ToolResult(output=value)


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
