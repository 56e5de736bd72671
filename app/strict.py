"""Models that refuse unknown fields, naming the one probably meant: a misspelt ``max_step=3``
must not be kept as a stray attribute while the real field keeps its default."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import (
    BaseModel,
    ConfigDict,
    ModelWrapValidatorHandler,
    ValidationError,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError


def unknown_field_message(owner: str, name: str, known: list[str]) -> str:
    """``Unknown field 'max_step' for ToolCallAgent; did you mean 'max_steps'?``"""
    import difflib  # only on an error: keeps it off the import path of every agent

    close = difflib.get_close_matches(name, [k for k in known if not k.startswith("_")], n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"Unknown field {name!r} for {owner}{hint}"


class _PrivateRead:
    """Reads one private attribute straight from ``__pydantic_private__``: pydantic's
    ``__getattr__`` fallback costs ~3 µs a read, and an agent reads a dozen per step. A value
    not set yet raises ``AttributeError`` here, and that fallback then reports it."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        if instance is None:  # on the class: the declaration, as pydantic gives it
            return owner.__private_attributes__[self.name]
        try:
            return instance.__pydantic_private__[self.name]
        except (KeyError, TypeError):
            raise AttributeError(self.name) from None


class StrictModel(BaseModel):
    """A ``BaseModel`` that forbids unknown fields, with a "did you mean" hint; state lives in
    declared fields or ``PrivateAttr``s (read fast, see ``_PrivateRead``)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    #: The private attributes read and written directly (see ``_PrivateRead``).
    __plain_private__: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        plain = set()
        for name, declared in cls.__private_attributes__.items():
            if hasattr(declared, "__get__"):
                continue  # a descriptor default: pydantic's fallback delegates to it
            owner = next((klass for klass in cls.__mro__ if name in vars(klass)), None)
            if owner is None:
                setattr(cls, name, _PrivateRead(name))
            elif not isinstance(vars(owner)[name], _PrivateRead):
                continue  # something the class defines itself (a property, a method)
            plain.add(name)
        cls.__plain_private__ = frozenset(plain)

    def __setattr__(self, name: str, value: Any) -> None:
        # A private attribute goes straight to its storage, as pydantic's own handler would
        # put it, without that handler's lookups (an agent sets a dozen per step).
        if name in self.__plain_private__:
            private = self.__pydantic_private__
            if private is not None:
                private[name] = value
                return
        super().__setattr__(name, value)

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
