"""Search engine clients for ``web_search`` (one module per engine)."""

from __future__ import annotations

from app.tool.search.baidu import BaiduSearchEngine
from app.tool.search.base import SearchEngineError, SearchItem, WebSearchEngine
from app.tool.search.bing import BingSearchEngine
from app.tool.search.duckduckgo import DuckDuckGoSearchEngine
from app.tool.search.google import GoogleSearchEngine
from app.tool.search.searxng import SearXNGSearchEngine

__all__ = [
    "ENGINES",
    "BaiduSearchEngine",
    "BingSearchEngine",
    "DuckDuckGoSearchEngine",
    "GoogleSearchEngine",
    "SearXNGSearchEngine",
    "SearchEngineError",
    "SearchItem",
    "WebSearchEngine",
    "engine_key",
]

#: Engines by lower-case name, in upstream's default order (SearXNG only when configured).
ENGINES: dict[str, type[WebSearchEngine]] = {
    "google": GoogleSearchEngine,
    "duckduckgo": DuckDuckGoSearchEngine,
    "baidu": BaiduSearchEngine,
    "bing": BingSearchEngine,
    "searxng": SearXNGSearchEngine,
}


def engine_key(name: str) -> str:
    """Config spelling to registry key: ``"DuckDuckGo"``, ``"duck duck go"`` -> ``"duckduckgo"``."""
    return "".join(name.lower().split()).replace("-", "").replace("_", "")
