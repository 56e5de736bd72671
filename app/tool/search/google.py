"""Google, through its basic HTML results page (what text browsers get, no JavaScript)."""

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


def _target(href: str) -> str | None:
    """Google wraps result links as ``/url?q=<target>&sa=...``."""
    if href.startswith("/url?"):
        values = parse_qs(urlparse(href).query).get("q")
        return values[0] if values else None
    if href.startswith(("http://", "https://")) and "google." not in urlparse(href).netloc:
        return href
    return None


class GoogleSearchEngine(WebSearchEngine):
    name = "Google"
    default_base_url = "https://www.google.com"
    # A text-browser agent gets the plain result page instead of the JavaScript one.
    user_agent = "Lynx/2.9.0dev.12 libwww-FM/2.14 SSL-MM/1.4.1 GNUTLS/3.7.8"

    async def search(
        self, client: Any, query: str, *, num_results: int, lang: str, country: str
    ) -> list[SearchItem]:
        from bs4 import BeautifulSoup  # the search extra

        html = await self._get_text(
            client,
            "GET",
            "/search",
            params={
                "q": query,
                "num": num_results + 2,
                "hl": lang,
                "gl": country,
                "safe": "active",
            },
            headers={"Cookie": "CONSENT=PENDING+987; SOCS=CAESHAgBEhIaAB"},
        )
        soup = BeautifulSoup(html, "html.parser")
        items: list[SearchItem] = []
        seen: set[str] = set()
        for block in soup.select("div.ezO2md") or soup.select("div.g") or [soup]:
            for link in block.find_all("a", href=True):
                url = _target(link_target(link))
                if not url or url in seen:
                    continue
                title_tag = link.find("span", class_="CVA68e") or link.find("h3") or link
                title = clean_text(title_tag.get_text(" "))
                if not title:
                    continue
                desc_tag = block.find("span", class_="FrIlee") if block is not soup else None
                seen.add(url)
                description = clean_text(desc_tag.get_text(" ")) if desc_tag else ""
                items.append(SearchItem(title=title, url=url, description=description))
                if block is not soup:
                    break  # one result per block
        if not items and "captcha" in html.lower():
            raise SearchEngineError("Google asked for a CAPTCHA (automated queries blocked)")
        return items[:num_results]
