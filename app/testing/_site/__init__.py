"""Holds ``sitecustomize.py`` for child interpreters (a package only so that it gets installed).

Put this directory on ``PYTHONPATH`` (``app.testing.netguard.SITE_DIR``); do not import it.
"""

__all__: list[str] = []
