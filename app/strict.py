"""Models that refuse unknown fields and name the field that was probably meant.

Agents, tools and flows take many keyword arguments; a misspelt one (``max_step=3``) must not
be kept as a stray attribute while the real field keeps its default. Unknown fields are
validation errors (``extra_forbidden``), and the message suggests the closest known field.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    ModelWrapValidatorHandler,
    ValidationError,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

__all__ = ["StrictModel", "unknown_field_message"]


def unknown_field_message(owner: str, name: str, known: list[str]) -> str:
    """``Unknown field 'max_step' for ToolCallAgent; did you mean 'max_steps'?``"""
    import difflib  # only on an error: keeps it off the import path of every agent

    close = difflib.get_close_matches(name, [k for k in known if not k.startswith("_")], n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"Unknown field {name!r} for {owner}{hint}"


class StrictModel(BaseModel):
    """A ``BaseModel`` that forbids unknown fields, with a "did you mean" hint.

    Subclasses keep their own state in declared fields or ``PrivateAttr``s; assigning an
    undeclared attribute raises as well (pydantic's ``object has no field``).
    """

    model_config = ConfigDict(extra="forbid")

    if TYPE_CHECKING:  # pydantic's own signature, not one synthesized from no fields

        def __init__(self, **data: Any) -> None: ...

    @model_validator(mode="wrap")
    @classmethod
    def _hint_unknown_fields(cls, data: Any, handler: ModelWrapValidatorHandler[Any]) -> Any:
        try:
            return handler(data)
        except ValidationError as e:
            errors = e.errors()
            if not any(_is_own_extra(error) for error in errors):
                raise
            raise ValidationError.from_exception_data(
                e.title, [_with_hint(cls, error) for error in errors]
            ) from None


def _is_own_extra(error: Any) -> bool:
    return error["type"] == "extra_forbidden" and len(error["loc"]) == 1


def _with_hint(cls: type[BaseModel], error: Any) -> InitErrorDetails:
    details: InitErrorDetails = {
        "type": error["type"],
        "loc": error["loc"],
        "input": error["input"],
    }
    if _is_own_extra(error):
        message = unknown_field_message(cls.__name__, str(error["loc"][0]), list(cls.model_fields))
        details["type"] = PydanticCustomError("extra_forbidden", message)
    elif "ctx" in error:
        details["ctx"] = error["ctx"]
    return details
