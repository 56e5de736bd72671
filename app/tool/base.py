"""The tool contract: what a tool declares to the model and what it hands back."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from app.strict import StrictModel
from app.tool.validation import validator_for

__all__ = [
    "BaseTool",
    "CLIResult",
    "ToolFailure",
    "ToolOutcome",
    "ToolResult",
    "format_output",
    "result_failed",
]


class ToolResult(BaseModel):
    """What a tool returns: output for the model, or an error the model can act on."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    output: Any = Field(default=None)
    error: str | None = Field(default=None)
    base64_image: str | None = Field(default=None)
    system: str | None = Field(default=None)

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
        """Whether the call failed: a ``ToolFailure`` or a result carrying an error."""
        return isinstance(self, ToolFailure) or bool(self.error)


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
    """Whether a tool's return value reports a failure, from its type, never its text: a
    failed ``ToolResult``, or the ``{"success": false, ...}`` dict of the tools that keep
    upstream's dict results (``python_execute``)."""
    if isinstance(result, ToolResult):
        return result.failed
    return isinstance(result, Mapping) and result.get("success") is False


def format_output(value: Any) -> str:
    """Render anything a tool may return as the text the model will read."""
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

    ``execute`` may return a ``ToolResult``, a string or any JSON-able value; raising
    ``ToolError`` (or any exception) turns into a failed result the model sees, never a crash.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid", defer_build=True)

    name: str
    description: str
    parameters: dict[str, Any] | None = None
    #: True when calls never change anything another call could observe (reads, lookups):
    #: such calls of one assistant message may then run at the same time.
    concurrency_safe: bool = False

    def validate_arguments(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The model's arguments checked against ``parameters`` (coerced where lossless, e.g.
        ``"5"`` for an integer); raises ``ToolArgumentsError`` listing every problem.

        The schema is compiled once, then found by identity: replace ``parameters`` with a
        new dict to change it (an edit in place is not noticed).
        """
        return validator_for(self.parameters).validate(self.name, arguments)

    def is_concurrency_safe(self, arguments: dict[str, Any]) -> bool:
        """Whether this particular call may run alongside other safe calls; tools whose
        commands differ (read vs. write) decide per call."""
        return self.concurrency_safe

    async def __call__(self, **kwargs: Any) -> Any:
        return await self.execute(**kwargs)

    @abstractmethod
    async def execute(self, *args: Any, **kwargs: Any) -> Any:
        """Run the tool with the model's arguments (as keywords; each tool names its own, so
        this signature accepts any, and type checkers accept any override)."""

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
