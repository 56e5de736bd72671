"""The web UI: watch and steer the agent's computer from a browser (``python -m app.web``).

Starlette and uvicorn are in the ``web`` extra (``pip install -e '.[web]'``); nothing here
is imported by the terminal programs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.web.cli import main
    from app.web.server import create_app

__all__ = ["create_app", "main"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from app.web.server import create_app

        return create_app
    if name == "main":
        from app.web.cli import main

        return main
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
