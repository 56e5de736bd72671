"""Upstream compatibility: re-exports upstream's ``app.tool.search.google_search`` from
:mod:`app.compat.tool.search.google_search`."""

from app.compat.tool.search.google_search import GoogleSearchEngine

__all__ = ["GoogleSearchEngine"]
