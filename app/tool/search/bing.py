"""Bing, through its HTML results page."""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import parse_qs, urlparse

from app.tool.search.base import SearchItem, WebSearchEngine


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
        params = {"q": query, "count": num_results, "setlang": lang, "cc": country}
        html = await self._get_text(client, "GET", "/search", params=params)
        items = self._results(html, "li.b_algo", "h2 a[href]", ("div.b_caption p", "p"), _unwrap)
        return items[:num_results]
