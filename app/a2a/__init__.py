"""Manus as an Agent2Agent (A2A) agent: ``python -m protocol.a2a.app.main`` (docs/a2a.md).

The official ``a2a-sdk`` serves the protocol (the ``a2a`` extra: ``pip install -e '.[a2a]'``);
:mod:`app.a2a.executor` runs our agent behind it and :mod:`app.a2a.server` builds the agent card
and the HTTP app. Nothing here is imported by the terminal programs.
"""

import sys

#: The access token's variable: read once at start and removed from the environment.
TOKEN_ENV = "OPENMANUS_A2A_TOKEN"
#: Exit status of a refused start (bad options, a config error).
EXIT_CONFIG = 2


def say(message: str) -> None:
    """A line for the person who started the server (stderr)."""
    print(message, file=sys.stderr, flush=True)
