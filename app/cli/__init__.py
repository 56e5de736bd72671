"""The terminal programs: ``main.py`` (:mod:`app.cli.agent`, also ``openmanus`` and
``python -m app.cli``), ``run_flow.py`` (:mod:`app.cli.flow`), ``run_mcp.py`` (:mod:`app.cli.mcp`).
None imports the framework before its options are parsed, so ``--help`` stays fast.
"""

from app.cli.agent import main
from app.cli.common import EXIT_CONFIG, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK

__all__ = ["EXIT_CONFIG", "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "main"]
