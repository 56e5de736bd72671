"""``create_chat_completion``: lets the model hand back a structured final answer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, Field, PrivateAttr, TypeAdapter, create_model

from app.exceptions import ToolError
from app.tool.base import BaseTool
from app.tool.declared import ToolArgs, schema_of, validate_with

_DESCRIPTION = "Give the final answer to the request in the required format."


class CreateChatCompletion(BaseTool):
    """Its schema follows ``response_type``: ``str`` gives ``{response: string}``; a pydantic
    model gives that model's fields; any other type is wrapped as ``{response: <type>}``.

    The arguments model is made per instance (it depends on ``response_type``): the model
    itself, or one ``response`` field of that type; it validates every call before it runs.
    """

    name: str = "create_chat_completion"
    description: str = _DESCRIPTION
    response_type: Any = str
    required: list[str] = ["response"]
    concurrency_safe: bool = True  # it only shapes an answer: no side effects

    _arguments: type[BaseModel] | None = PrivateAttr(default=None)

    def __init__(self, response_type: Any = str, **data: Any) -> None:
        super().__init__(**data)
        self.response_type = response_type
        self._arguments = self._build_model()
        self.parameters = self._build_parameters()

    def arguments_model(self) -> type[BaseModel] | None:
        return self._arguments

    def validate_arguments(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Checked by the arguments model, whatever ``parameters`` looks like (for a pydantic
        ``response_type`` it keeps upstream's shape, titles included)."""
        if self._arguments is None:
            return super().validate_arguments(arguments)
        return validate_with(self._arguments, self.name, arguments)

    def _build_model(self) -> type[BaseModel]:
        rtype = self.response_type
        if isinstance(rtype, type) and issubclass(rtype, BaseModel):
            return rtype
        described = "description" in TypeAdapter(rtype).json_schema()
        field = Field() if described else Field(description="The answer to return.")
        return create_model(
            "create_chat_completion_arguments", __base__=ToolArgs, response=(rtype, field)
        )

    def _build_parameters(self) -> dict[str, Any]:
        rtype = self.response_type
        if isinstance(rtype, type) and issubclass(rtype, BaseModel):
            schema = rtype.model_json_schema()  # upstream's shape: the model's own schema
            self.required = list(schema.get("required", []))
            return {
                "type": "object",
                "properties": schema.get("properties", {}),
                "required": self.required,
                **({"$defs": schema["$defs"]} if "$defs" in schema else {}),
            }
        assert self._arguments is not None
        return schema_of(self._arguments)

    async def execute(self, required: list[str] | None = None, **kwargs: Any) -> Any:
        rtype = self.response_type
        try:
            if isinstance(rtype, type) and issubclass(rtype, BaseModel):
                return rtype.model_validate(kwargs)
            if "response" not in kwargs:  # a Python caller; a model's call is checked before
                raise ToolError("Missing the required argument 'response'.")
            return TypeAdapter(rtype).validate_python(kwargs["response"])
        except ToolError:
            raise
        except Exception as e:  # validation of the model's answer: let it correct itself
            raise ToolError(f"The answer does not match the required format: {e}") from e
