"""The terminal programs: ``main.py`` (:mod:`app.cli.agent`; also the ``openmanus`` command
and ``python -m app.cli``), ``run_flow.py`` (:mod:`app.cli.flow`) and ``run_mcp.py``
(:mod:`app.cli.mcp`).

They share the session loop and exit codes (:mod:`app.cli.common`), their options
(:mod:`app.cli.options`) and the terminal view of events (:mod:`app.cli.render`). None of
them imports the framework at the top (``main.py --help`` stays fast); a program imports it
once its options are parsed.
"""

from app.cli.agent import main
from app.cli.common import EXIT_CONFIG, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK

__all__ = ["EXIT_CONFIG", "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "main"]
