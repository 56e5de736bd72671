"""``web_search``: the preferred engine, then the fallbacks, in rounds ``retry_delay`` apart
(up to ``max_retries``); when all fail, one result names every failure."""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from app.config import SearchSettings, config
from app.exceptions import ToolError
from app.logger import logger
from app.tool.base import BaseTool, ToolResult
from app.tool.declared import ToolArgs
from app.tool.search import ENGINES, SearchEngineError, SearchItem, WebSearchEngine, engine_key
from app.tool.search.fetch import fetch_page_text, import_httpx

_DESCRIPTION = (
    "Search the web for up-to-date information. Returns titles, URLs and short descriptions of "
    "the top results; with fetch_content the readable text of each result page is included too."
)
_CONTENT_PREVIEW = 1000
_FETCH_CONCURRENCY = 4


class SearchResult(BaseModel):
    """One result as upstream shapes it (``raw_content`` only with ``fetch_content``)."""

    position: int
    url: str
    title: str = ""
    description: str = ""
    source: str = ""
    raw_content: str | None = None

    def __str__(self) -> str:
        return f"{self.title} ({self.url})"


class SearchMetadata(BaseModel):
    total_results: int
    language: str
    country: str


class SearchResponse(ToolResult):
    """The results plus their text rendering in ``output`` (or one ``error``)."""

    query: str = ""
    results: list[SearchResult] = Field(default_factory=list)
    metadata: SearchMetadata | None = None


class WebSearchArgs(ToolArgs):
    query: str = Field(description="What to search for.")
    num_results: int = Field(5, description="How many results to return (default 5).")
    lang: str | None = Field(
        None, description="Language code of the results (default from config, e.g. en)."
    )
    country: str | None = Field(
        None, description="Country code of the results (default from config, e.g. us)."
    )
    fetch_content: bool = Field(
        False, description="Also fetch each result page and include its text."
    )


class WebSearch(BaseTool):
    name: str = "web_search"
    concurrency_safe: bool = True  # read-only: several searches of one message run at once
    description: str = _DESCRIPTION
    Args: ClassVar[type[ToolArgs]] = WebSearchArgs

    settings: SearchSettings | None = Field(
        default=None, description="Search settings; None means the config's [search]."
    )
    engines: dict[str, WebSearchEngine] | None = Field(
        default=None, description="Engine clients by name; None builds them from the settings."
    )
    max_results: int = Field(default=20, ge=1)

    def _settings(self) -> SearchSettings:
        if self.settings is None:
            self.settings = config.section_or_default("search_config")
        return self.settings

    def _engines(self) -> dict[str, WebSearchEngine]:
        if self.engines is None:
            url = self._settings().searxng_url
            self.engines = {
                key: cls(url) if key == "searxng" else cls() for key, cls in ENGINES.items()
            }
        return {engine_key(name): engine for name, engine in self.engines.items()}

    def engine_order(self) -> list[WebSearchEngine]:
        """Preferred engine, then the fallbacks, then every other configured engine."""
        settings = self._settings()
        engines = self._engines()
        names = [settings.engine, *settings.fallback_engines, *engines]
        order: list[WebSearchEngine] = []
        for name in names:
            engine = engines.get(engine_key(name))
            if engine is None:
                logger.warning(f"[search] unknown engine {name!r}; known: {', '.join(engines)}")
                continue
            if engine.configured and engine not in order:
                order.append(engine)
        return order

    async def execute(
        self,
        query: str,
        num_results: int = 5,
        lang: str | None = None,
        country: str | None = None,
        fetch_content: bool = False,
        *,
        rounds: int | None = None,
    ) -> SearchResponse:
        """Search; ``rounds`` overrides ``1 + max_retries`` (the browser uses a single round)."""
        if not isinstance(query, str) or not query.strip():
            raise ToolError("query must be a non-empty string")
        try:
            num_results = max(1, min(int(num_results), self.max_results))
        except (TypeError, ValueError):
            raise ToolError(f"num_results must be an integer, not {num_results!r}") from None
        settings = self._settings()
        lang = lang or settings.lang
        country = country or settings.country
        rounds = rounds if rounds is not None else settings.max_retries + 1
        httpx = import_httpx("web_search")

        failures: list[str] = []
        async with httpx.AsyncClient(timeout=settings.timeout, follow_redirects=True) as client:
            for attempt in range(rounds):
                failures = []
                for engine in self.engine_order():
                    try:
                        items = await engine.search(
                            client, query, num_results=num_results, lang=lang, country=country
                        )
                    except Exception as e:  # even a parser surprise must not stop the fallbacks
                        failure = (
                            e if isinstance(e, SearchEngineError) else f"{type(e).__name__}: {e}"
                        )
                        failures.append(f"{engine.name}: {failure}")
                        logger.warning(f"Search engine {engine.name} failed: {failure}")
                        continue
                    if not items:
                        failures.append(f"{engine.name}: no results")
                        continue
                    results = _results(items, engine.name)
                    if fetch_content:
                        await _fetch_all(client, results, settings.timeout)
                    return _response(query, results, lang, country, failures)
                if attempt + 1 < rounds and settings.retry_delay > 0:
                    logger.warning(
                        f"All search engines failed; retrying in {settings.retry_delay} s "
                        f"(round {attempt + 2} of {rounds})"
                    )
                    await asyncio.sleep(settings.retry_delay)
        detail = "; ".join(failures) or "no search engine is configured"
        return SearchResponse(
            query=query, error=f"All search engines failed for {query!r}: {detail}"
        )


class WebContentFetcher:
    """Upstream's page fetcher: a page's readable text, or None when it cannot be fetched."""

    @staticmethod
    async def fetch_content(url: str, timeout: int = 10) -> str | None:
        httpx = import_httpx("web_search")
        async with httpx.AsyncClient(follow_redirects=True) as client:
            try:
                return await fetch_page_text(client, url, timeout=timeout)
            except ValueError as e:
                logger.warning("Could not fetch {}: {}", url, e)
                return None


def _results(items: list[SearchItem], source: str) -> list[SearchResult]:
    return [
        SearchResult(
            position=i,
            url=item.url,
            title=item.title or item.url,
            description=item.description,
            source=source,
        )
        for i, item in enumerate(items, start=1)
    ]


async def _fetch_all(client: Any, results: list[SearchResult], timeout: float) -> None:
    gate = asyncio.Semaphore(_FETCH_CONCURRENCY)

    async def fetch(result: SearchResult) -> None:
        async with gate:
            try:
                result.raw_content = await fetch_page_text(client, result.url, timeout=timeout)
            except ValueError as e:
                result.raw_content = f"(could not fetch the page: {e})"

    await asyncio.gather(*(fetch(result) for result in results))


def _response(
    query: str, results: list[SearchResult], lang: str, country: str, failures: list[str]
) -> SearchResponse:
    lines = [f"Search results for '{query}':"]
    for result in results:
        lines.append(f"\n{result.position}. {result.title}")
        lines.append(f"   URL: {result.url}")
        if result.description:
            lines.append(f"   Description: {result.description}")
        if result.raw_content:
            preview = result.raw_content[:_CONTENT_PREVIEW]
            more = "..." if len(result.raw_content) > _CONTENT_PREVIEW else ""
            lines.append(f"   Content: {preview}{more}")
    metadata = SearchMetadata(total_results=len(results), language=lang, country=country)
    lines += [
        "\nMetadata:",
        f"- Total results: {metadata.total_results}",
        f"- Language: {lang}",
        f"- Country: {country}",
        f"- Engine: {results[0].source}",
    ]
    if failures:
        lines.append(f"- Engines that failed first: {'; '.join(failures)}")
    return SearchResponse(output="\n".join(lines), query=query, results=results, metadata=metadata)
