"""Tools declared once: ``@tool`` on a typed function (docs/agents.md).

One pydantic model built from the signature is both the schema offered to the model and the
check of its arguments, so the two never drift; the docstring gives the description (before
``Args:``) and each argument's (Google style ``name: text`` under ``Args:``). A plain (sync)
function runs in a worker thread, so it never blocks the event loop.
"""

from __future__ import annotations

import asyncio
import inspect
import re
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, get_type_hints, overload

from pydantic import BaseModel, Field, PrivateAttr, create_model

from app.tool.base import BaseTool
from app.tool.declared import ToolArgs, schema_of

_ARGS_HEADER = re.compile(r"^\s*(Args|Arguments|Parameters):\s*$")
_ARG_LINE = re.compile(r"^\s*\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SECTION = re.compile(r"^\s*[A-Z][A-Za-z ]*:\s*$")  # Returns:, Raises:, Examples: ...


class FunctionTool(BaseTool):
    """A tool made from a function by :func:`tool`; ``parameters`` is derived, not written."""

    _function: Callable[..., Any] = PrivateAttr()
    _arguments: type[BaseModel] | None = PrivateAttr(default=None)

    @classmethod
    def from_function(
        cls,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
    ) -> FunctionTool:
        summary, documented = parse_docstring(inspect.getdoc(function) or "")
        arguments = arguments_model(function, documented)
        built = cls(
            name=name or function.__name__,
            description=description if description is not None else summary,
        )
        built._function = function
        built._arguments = arguments
        # The model's own schema object (not a validated copy): calls are then checked by it.
        built.__dict__["parameters"] = schema_of(arguments)
        return built

    def arguments_model(self) -> type[BaseModel] | None:
        """The model built from the function's signature."""
        return self._arguments

    async def execute(self, **kwargs: Any) -> Any:
        if inspect.iscoroutinefunction(self._function):
            return await self._function(**kwargs)
        outcome = await asyncio.to_thread(self._function, **kwargs)
        if inspect.isawaitable(outcome):
            return await outcome
        return outcome


@overload
def tool(function: Callable[..., Any], /) -> FunctionTool: ...


@overload
def tool(
    *, name: str | None = None, description: str | None = None
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Make a typed function a tool: ``@tool`` or ``@tool(name=..., description=...)``. Every
    parameter needs a type annotation; ``*args``, ``**kwargs``, positional-only are refused."""

    def make(fn: Callable[..., Any]) -> FunctionTool:
        return FunctionTool.from_function(fn, name=name, description=description)

    return make(function) if function is not None else make


def arguments_model(
    function: Callable[..., Any], descriptions: Mapping[str, str] | None = None
) -> type[BaseModel]:
    """A pydantic model of ``function``'s parameters: it is both the schema and the check."""
    signature = inspect.signature(function)
    hints = get_type_hints(function, include_extras=True)
    fields: dict[str, Any] = {}
    for param in signature.parameters.values():
        where = f"{function.__qualname__}({param.name})"
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise TypeError(f"{where}: a tool takes named parameters only")
        if param.name not in hints:
            raise TypeError(f"{where}: every parameter of a tool needs a type annotation")
        default = ... if param.default is param.empty else param.default
        text = (descriptions or {}).get(param.name)
        fields[param.name] = (hints[param.name], Field(default, description=text))
    return create_model(f"{function.__name__}_arguments", __base__=_FunctionArgs, **fields)


class _FunctionArgs(ToolArgs):
    """A function takes exactly its parameters, and its schema says so."""

    closed_schema: ClassVar[bool] = True


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The summary (text before ``Args:``) and each documented argument's description."""
    summary: list[str] = []
    args: dict[str, str] = {}
    current: str | None = None
    in_args = False
    indent: int | None = None  # of the argument lines: the first line after ``Args:``
    for line in doc.splitlines():
        if _ARGS_HEADER.match(line):
            in_args = True
            continue
        if in_args and indent is None and line.strip():
            indent = len(line) - len(line.lstrip())
        if in_args:
            if _SECTION.match(line):
                in_args, current = False, None
                continue
            match = _ARG_LINE.match(line)
            if match and (current is None or len(line) - len(line.lstrip()) <= (indent or 0)):
                current = match.group(1)
                args[current] = match.group(2).strip()
            elif current is not None and line.strip():
                args[current] = f"{args[current]} {line.strip()}".strip()
            continue
        if current is None and not args:
            summary.append(line)
    return "\n".join(summary).strip(), args
