"""DuckDuckGo, through its no-JavaScript HTML endpoint (``html.duckduckgo.com/html/``)."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlparse

from app.tool.search.base import (
    SearchEngineError,
    SearchItem,
    WebSearchEngine,
    clean_text,
    link_target,
)

__all__ = ["DuckDuckGoSearchEngine"]


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
        from bs4 import BeautifulSoup

        html = await self._get_text(
            client, "POST", "/html/", data={"q": query, "kl": f"{country}-{lang}".lower()}
        )
        soup = BeautifulSoup(html, "html.parser")
        items: list[SearchItem] = []
        for block in soup.select("div.result"):
            if "result--ad" in (block.get("class") or []):
                continue
            link = block.select_one("a.result__a[href]")
            if link is None:
                continue
            desc = block.select_one(".result__snippet")
            items.append(
                SearchItem(
                    title=clean_text(link.get_text(" ")),
                    url=_unwrap(link_target(link)),
                    description=clean_text(desc.get_text(" ")) if desc else "",
                )
            )
        if not items and "anomaly" in html.lower():
            raise SearchEngineError("DuckDuckGo flagged the query as automated traffic")
        return items[:num_results]
