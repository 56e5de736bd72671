"""Guard a child interpreter's network when ``OPENMANUS_BLOCK_NETWORK=1``.

Python imports ``sitecustomize`` at start-up from ``sys.path``; tests that spawn Python put this
directory on ``PYTHONPATH``. The guard module is loaded from its file rather than imported as
``app.testing.netguard``: the child may not have ``app`` importable, and importing the package
here would run it before the child's own ``sys.path`` set-up. Both copies share their state on
the ``socket`` module, so a later ``app.testing.netguard.install()`` is still a no-op.
"""

from __future__ import annotations

import os

__all__: list[str] = []


def _install_guard() -> None:
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "netguard.py")
    spec = importlib.util.spec_from_file_location("_openmanus_netguard", path)
    if spec is None or spec.loader is None:  # pragma: no cover - the file ships with us
        raise ImportError(f"cannot load the network guard from {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.install()


if os.environ.get("OPENMANUS_BLOCK_NETWORK") == "1":
    _install_guard()
