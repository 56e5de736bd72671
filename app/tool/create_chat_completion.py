"""``create_chat_completion``: lets the model hand back a structured final answer."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, TypeAdapter

from app.exceptions import ToolError
from app.tool.base import BaseTool

__all__ = ["CreateChatCompletion"]

_DESCRIPTION = "Give the final answer to the request in the required format."


class CreateChatCompletion(BaseTool):
    """Its schema follows ``response_type``: ``str`` gives ``{response: string}``; a pydantic
    model gives that model's fields; any other type is wrapped as ``{response: <type>}``."""

    name: str = "create_chat_completion"
    description: str = _DESCRIPTION
    response_type: Any = str
    required: list[str] = ["response"]
    concurrency_safe: bool = True  # it only shapes an answer: no side effects

    def __init__(self, response_type: Any = str, **data: Any) -> None:
        super().__init__(**data)
        self.response_type = response_type
        self.parameters = self._build_parameters()

    def _build_parameters(self) -> dict[str, Any]:
        rtype = self.response_type
        if isinstance(rtype, type) and issubclass(rtype, BaseModel):
            schema = rtype.model_json_schema()
            self.required = list(schema.get("required", []))
            return {
                "type": "object",
                "properties": schema.get("properties", {}),
                "required": self.required,
                **({"$defs": schema["$defs"]} if "$defs" in schema else {}),
            }
        schema = TypeAdapter(rtype).json_schema()
        schema.setdefault("description", "The answer to return.")
        return {"type": "object", "properties": {"response": schema}, "required": ["response"]}

    async def execute(self, required: list[str] | None = None, **kwargs: Any) -> Any:
        rtype = self.response_type
        try:
            if isinstance(rtype, type) and issubclass(rtype, BaseModel):
                return rtype.model_validate(kwargs)
            if "response" not in kwargs:
                raise ToolError("Missing the required argument 'response'.")
            return TypeAdapter(rtype).validate_python(kwargs["response"])
        except ToolError:
            raise
        except Exception as e:  # validation of the model's answer: let it correct itself
            raise ToolError(f"The answer does not match the required format: {e}") from e
