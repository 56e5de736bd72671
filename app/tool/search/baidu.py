"""Baidu, through its HTML results page (links are Baidu's redirect links, as upstream)."""

from __future__ import annotations

from typing import Any

from app.tool.search.base import SearchItem, WebSearchEngine, clean_text, link_target

__all__ = ["BaiduSearchEngine"]


class BaiduSearchEngine(WebSearchEngine):
    name = "Baidu"
    default_base_url = "https://www.baidu.com"

    async def search(
        self, client: Any, query: str, *, num_results: int, lang: str, country: str
    ) -> list[SearchItem]:
        from bs4 import BeautifulSoup

        html = await self._get_text(
            client, "GET", "/s", params={"wd": query, "rn": num_results, "ie": "utf-8"}
        )
        soup = BeautifulSoup(html, "html.parser")
        items: list[SearchItem] = []
        for block in soup.select("div.result, div.c-container"):
            link = block.select_one("h3 a[href]")
            if link is None:
                continue
            url = link_target(link)
            if any(item.url == url for item in items):
                continue
            desc = block.select_one(".c-abstract") or block.select_one("[class*=content-right]")
            items.append(
                SearchItem(
                    title=clean_text(link.get_text(" ")),
                    url=url,
                    description=clean_text(desc.get_text(" ")) if desc else "",
                )
            )
        return items[:num_results]
