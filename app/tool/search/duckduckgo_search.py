"""Upstream compatibility: re-exports upstream's ``app.tool.search.duckduckgo_search`` from
:mod:`app.compat.tool.search.duckduckgo_search`."""

from app.compat.tool.search.duckduckgo_search import DuckDuckGoSearchEngine

__all__ = ["DuckDuckGoSearchEngine"]
