"""SearXNG, a self-hosted metasearch engine, through its JSON API (``format=json`` must be
enabled in the instance's ``settings.yml``: ``search.formats: [html, json]``)."""

from __future__ import annotations

import json
from typing import Any

from app.tool.search.base import SearchEngineError, SearchItem, WebSearchEngine, clean_text


class SearXNGSearchEngine(WebSearchEngine):
    name = "SearXNG"
    default_base_url = ""  # no public default: set [search] searxng_url

    async def search(
        self, client: Any, query: str, *, num_results: int, lang: str, country: str
    ) -> list[SearchItem]:
        if not self.configured:
            raise SearchEngineError("no instance configured (set [search] searxng_url)")
        body = await self._get_text(
            client,
            "GET",
            "/search",
            params={
                "q": query,
                "format": "json",
                "language": f"{lang}-{country.upper()}",
                "pageno": 1,
            },
        )
        try:
            data = json.loads(body)
        except ValueError as e:
            raise SearchEngineError(
                "the instance did not answer JSON (is format=json enabled in settings.yml?)"
            ) from e
        items = [
            SearchItem(
                title=clean_text(hit.get("title")) or hit["url"],
                url=hit["url"],
                description=clean_text(hit.get("content")),
            )
            for hit in data.get("results") or []
            if isinstance(hit, dict) and hit.get("url")
        ]
        return items[:num_results]
