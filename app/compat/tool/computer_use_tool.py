"""Upstream compatibility: ``computer_use`` (a Daytona desktop); building it raises an error."""

from __future__ import annotations

import string

from app.compat.daytona.tool_base import SandboxToolsBase

__all__ = ["KEYBOARD_KEYS", "MOUSE_BUTTONS", "ComputerUseTool"]

#: Key names the tool accepted: letters, digits, named keys, function keys and shortcuts.
KEYBOARD_KEYS: list[str] = [
    *string.ascii_lowercase,
    *string.digits,
    *("enter", "esc", "backspace", "tab", "space", "delete"),
    *("ctrl", "alt", "shift", "win", "up", "down", "left", "right"),
    *(f"f{n}" for n in range(1, 13)),
    *("ctrl+c", "ctrl+v", "ctrl+x", "ctrl+z", "ctrl+a", "ctrl+s"),
    *("alt+tab", "alt+f4", "ctrl+alt+delete"),
]
MOUSE_BUTTONS: list[str] = ["left", "right", "middle"]


class ComputerUseTool(SandboxToolsBase):
    name: str = "computer_use"
    description: str = "Mouse and keyboard on a Daytona sandbox desktop (not supported here)."
