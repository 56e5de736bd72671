"""Upstream's module path for the DuckDuckGo engine (ours: :mod:`app.tool.search.duckduckgo`)."""

from app.tool.search.duckduckgo import DuckDuckGoSearchEngine

__all__ = ["DuckDuckGoSearchEngine"]
