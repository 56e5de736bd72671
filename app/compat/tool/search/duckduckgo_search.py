"""Upstream compatibility: upstream's path of the DuckDuckGo engine (ours: ``duckduckgo``)."""

from app.tool.search.duckduckgo import DuckDuckGoSearchEngine

__all__ = ["DuckDuckGoSearchEngine"]
