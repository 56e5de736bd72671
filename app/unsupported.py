"""Stand-ins for upstream names whose feature this project does not provide (Daytona cloud
sandboxes, Bedrock's own API, crawl4ai): importing them works, so upstream code loads; using
them raises one :class:`UnsupportedFeatureError` that says what is needed instead."""

from __future__ import annotations

from typing import Any, NoReturn

from app.exceptions import UnsupportedFeatureError

__all__ = ["DAYTONA_MESSAGE", "Unsupported", "daytona_unsupported", "unsupported"]

DAYTONA_MESSAGE = (
    "{what} needs Daytona cloud sandboxes, which OpenManus-py does not support (it would need "
    "the daytona SDK, a Daytona account and [daytona] daytona_api_key). To run the agent's "
    'code in isolation here, use Manus with [sandbox] backend = "docker" or "bubblewrap" '
    "(app.agent.sandbox_agent.SandboxManus does that)."
)


def unsupported(message: str) -> NoReturn:
    raise UnsupportedFeatureError(message)


def daytona_unsupported(what: str) -> UnsupportedFeatureError:
    """The error for any use of upstream's Daytona integration."""
    return UnsupportedFeatureError(DAYTONA_MESSAGE.format(what=what))


class Unsupported:
    """An object standing for an upstream client we cannot build: calling it or reading any
    attribute raises the error named at creation."""

    def __init__(self, message: str) -> None:
        object.__setattr__(self, "_message", message)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        unsupported(object.__getattribute__(self, "_message"))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        unsupported(object.__getattribute__(self, "_message"))

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "<unsupported: " + object.__getattribute__(self, "_message").split(":")[0] + ">"
