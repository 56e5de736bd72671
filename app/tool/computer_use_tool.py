"""Upstream compatibility: re-exports upstream's ``app.tool.computer_use_tool`` from
:mod:`app.compat.tool.computer_use_tool`."""

from app.compat.tool.computer_use_tool import KEYBOARD_KEYS, MOUSE_BUTTONS, ComputerUseTool

__all__ = ["KEYBOARD_KEYS", "MOUSE_BUTTONS", "ComputerUseTool"]
