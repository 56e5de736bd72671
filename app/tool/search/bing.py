"""Bing, through its HTML results page."""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import parse_qs, urlparse

from app.tool.search.base import SearchItem, WebSearchEngine, clean_text, link_target

__all__ = ["BingSearchEngine"]


def _unwrap(href: str) -> str:
    """Bing may wrap links as ``/ck/a?...&u=a1<base64url of the target>``."""
    parsed = urlparse(href)
    if parsed.path.startswith("/ck/a"):
        encoded = (parse_qs(parsed.query).get("u") or [""])[0]
        if encoded.startswith("a1"):
            data = encoded[2:]
            try:
                return base64.urlsafe_b64decode(data + "=" * (-len(data) % 4)).decode()
            except (ValueError, UnicodeDecodeError):
                return href
    return href


class BingSearchEngine(WebSearchEngine):
    name = "Bing"
    default_base_url = "https://www.bing.com"

    async def search(
        self, client: Any, query: str, *, num_results: int, lang: str, country: str
    ) -> list[SearchItem]:
        from bs4 import BeautifulSoup

        html = await self._get_text(
            client,
            "GET",
            "/search",
            params={"q": query, "count": num_results, "setlang": lang, "cc": country},
        )
        soup = BeautifulSoup(html, "html.parser")
        items: list[SearchItem] = []
        for block in soup.select("li.b_algo"):
            link = block.select_one("h2 a[href]")
            if link is None:
                continue
            desc = block.select_one("div.b_caption p") or block.select_one("p")
            items.append(
                SearchItem(
                    title=clean_text(link.get_text(" ")),
                    url=_unwrap(link_target(link)),
                    description=clean_text(desc.get_text(" ")) if desc else "",
                )
            )
        return items[:num_results]
