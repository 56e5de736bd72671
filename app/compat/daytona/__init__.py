"""Upstream compatibility: upstream's Daytona integration (cloud sandboxes), importable names
only: agent code runs in our ``[sandbox]`` backends, and every use raises an error saying so."""

from __future__ import annotations

from typing import Any, NoReturn

from app.exceptions import UnsupportedFeatureError

__all__ = ["DAYTONA_MESSAGE", "Unsupported", "daytona_unsupported"]

DAYTONA_MESSAGE = (
    "{what} needs Daytona cloud sandboxes, which OpenManus-py does not support (it would need "
    "the daytona SDK, a Daytona account and [daytona] daytona_api_key). To run the agent's "
    'code in isolation here, use Manus with [sandbox] backend = "docker" or "bubblewrap" '
    "(app.agent.sandbox_agent.SandboxManus does that)."
)


def daytona_unsupported(what: str) -> UnsupportedFeatureError:
    """The error for any use of upstream's Daytona integration."""
    return UnsupportedFeatureError(DAYTONA_MESSAGE.format(what=what))


class Unsupported:
    """An upstream client we cannot build: calling it or reading an attribute raises."""

    def __init__(self, what: str) -> None:
        object.__setattr__(self, "_what", what)

    def _refuse(self) -> NoReturn:
        raise daytona_unsupported(object.__getattribute__(self, "_what"))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        self._refuse()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self._refuse()

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"<unsupported: {object.__getattribute__(self, '_what')}>"
