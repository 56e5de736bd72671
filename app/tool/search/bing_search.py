"""Upstream compatibility: re-exports upstream's ``app.tool.search.bing_search`` from
:mod:`app.compat.tool.search.bing_search`."""

from app.compat.tool.search.bing_search import (
    ABSTRACT_MAX_LENGTH,
    BING_HOST_URL,
    BING_SEARCH_URL,
    HEADERS,
    USER_AGENTS,
    BingSearchEngine,
)

__all__ = [
    "ABSTRACT_MAX_LENGTH",
    "BING_HOST_URL",
    "BING_SEARCH_URL",
    "HEADERS",
    "USER_AGENTS",
    "BingSearchEngine",
]
