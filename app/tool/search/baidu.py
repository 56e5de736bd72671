"""Baidu, through its HTML results page (links are Baidu's redirect links, as upstream)."""

from __future__ import annotations

from typing import Any

from app.tool.search.base import SearchItem, WebSearchEngine


class BaiduSearchEngine(WebSearchEngine):
    name = "Baidu"
    default_base_url = "https://www.baidu.com"

    async def search(
        self, client: Any, query: str, *, num_results: int, lang: str, country: str
    ) -> list[SearchItem]:
        html = await self._get_text(
            client, "GET", "/s", params={"wd": query, "rn": num_results, "ie": "utf-8"}
        )
        descriptions = (".c-abstract", "[class*=content-right]")
        items = self._results(html, "div.result, div.c-container", "h3 a[href]", descriptions)
        return items[:num_results]
