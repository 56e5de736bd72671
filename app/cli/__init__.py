"""The terminal programs: ``main.py`` (:mod:`app.cli.agent`; also the ``openmanus`` command
and ``python -m app.cli``), ``run_flow.py`` (:mod:`app.cli.flow`) and ``run_mcp.py``
(:mod:`app.cli.mcp`).

They share the session loop and exit codes (:mod:`app.cli.common`), their options
(:mod:`app.cli.options`) and the terminal view of events (:mod:`app.cli.render`). Names load
on first use, so importing this package costs nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from app._lazy import lazy_getattr

if TYPE_CHECKING:
    from app.cli.agent import main
    from app.cli.common import EXIT_CONFIG, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK

__all__ = ["EXIT_CONFIG", "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "main"]

_LOCATIONS = {
    "EXIT_CONFIG": "app.cli.common",
    "EXIT_FAILED": "app.cli.common",
    "EXIT_INTERRUPTED": "app.cli.common",
    "EXIT_OK": "app.cli.common",
    "main": "app.cli.agent",
}

__getattr__ = lazy_getattr(__name__, _LOCATIONS)
