"""Upstream compatibility: upstream's path of the Bing engine (ours: ``app.tool.search.bing``),
with its module constants derived from ours."""

from app.tool.search.base import USER_AGENT
from app.tool.search.bing import BingSearchEngine

__all__ = [
    "ABSTRACT_MAX_LENGTH",
    "BING_HOST_URL",
    "BING_SEARCH_URL",
    "HEADERS",
    "USER_AGENTS",
    "BingSearchEngine",
]

ABSTRACT_MAX_LENGTH = 300
USER_AGENTS = [USER_AGENT]
HEADERS = {"User-Agent": USER_AGENT}
BING_HOST_URL = BingSearchEngine.default_base_url
BING_SEARCH_URL = f"{BING_HOST_URL}/search?q="
