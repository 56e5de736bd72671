"""DuckDuckGo, through its no-JavaScript HTML endpoint (``html.duckduckgo.com/html/``)."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlparse

from app.tool.search.base import SearchEngineError, SearchItem, WebSearchEngine


def _unwrap(href: str) -> str:
    """Result links may go through ``//duckduckgo.com/l/?uddg=<target>``."""
    parsed = urlparse(href)
    target = parse_qs(parsed.query).get("uddg")
    if parsed.path.startswith("/l/") and target:
        return target[0]
    return href


class DuckDuckGoSearchEngine(WebSearchEngine):
    name = "DuckDuckGo"
    default_base_url = "https://html.duckduckgo.com"

    async def search(
        self, client: Any, query: str, *, num_results: int, lang: str, country: str
    ) -> list[SearchItem]:
        html = await self._get_text(
            client, "POST", "/html/", data={"q": query, "kl": f"{country}-{lang}".lower()}
        )
        items = self._results(
            html, "div.result:not(.result--ad)", "a.result__a[href]", (".result__snippet",), _unwrap
        )
        if not items and "anomaly" in html.lower():
            raise SearchEngineError("DuckDuckGo flagged the query as automated traffic")
        return items[:num_results]
