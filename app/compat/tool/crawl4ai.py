"""Upstream compatibility: upstream's ``crawl4ai`` tool (same name and arguments), served by
our page fetcher over HTTP: JavaScript is not run; pages that need it: ``browser_use``."""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar
from urllib.parse import urlparse

from pydantic import Field

from app.exceptions import ToolError
from app.tool.base import BaseTool, ToolResult
from app.tool.declared import ToolArgs
from app.tool.search.fetch import fetch_page_text, import_httpx

__all__ = ["Crawl4aiTool"]

_MAX_URLS = 10


class Crawl4aiArgs(ToolArgs):
    urls: list[str] = Field(description=f"http(s) URLs to fetch (at most {_MAX_URLS})")
    timeout: int | None = Field(None, description="Seconds per page (default 30)")
    bypass_cache: bool | None = Field(None, description="Accepted; pages are never cached")
    word_count_threshold: int | None = Field(
        None, description="Drop text lines with fewer words than this (default 10)"
    )


class Crawl4aiTool(BaseTool):
    name: str = "crawl4ai"
    description: str = (
        "Fetch one or more web pages and return their readable text (scripts, styles and "
        "navigation removed). Pages are not rendered with JavaScript; use browser_use for "
        "pages that need it."
    )
    Args: ClassVar[type[ToolArgs]] = Crawl4aiArgs
    concurrency_safe: bool = True

    async def execute(
        self,
        urls: list[str] | str,
        timeout: int | None = None,
        bypass_cache: bool | None = None,
        word_count_threshold: int | None = None,
        **_: Any,
    ) -> ToolResult:
        timeout = 30 if timeout is None else timeout
        word_count_threshold = 10 if word_count_threshold is None else word_count_threshold
        httpx = import_httpx("crawl4ai")
        targets = [urls] if isinstance(urls, str) else list(urls or [])
        if not targets:
            raise ToolError("urls: give at least one URL")
        if len(targets) > _MAX_URLS:
            raise ToolError(f"urls: at most {_MAX_URLS} URLs per call, got {len(targets)}")
        bad = [u for u in targets if urlparse(str(u)).scheme not in ("http", "https")]
        if bad:
            raise ToolError(f"urls: not http(s) URLs: {', '.join(map(str, bad))}")
        async with httpx.AsyncClient(follow_redirects=True) as client:
            pages = await asyncio.gather(
                *(
                    self._one(client, fetch_page_text, u, timeout, word_count_threshold)
                    for u in targets
                )
            )
        failed = sum(1 for ok, _ in pages if not ok)
        text = "\n\n".join(body for _, body in pages)
        if failed == len(pages):
            return ToolResult(error=text)
        return ToolResult(output=text)

    @staticmethod
    async def _one(
        client: Any, fetch: Any, url: str, timeout: float, min_words: int
    ) -> tuple[bool, str]:
        try:
            text = await fetch(client, url, timeout=timeout)
        except ValueError as e:
            return False, f"## {url}\nFailed: {e}"
        lines = [line for line in text.splitlines() if len(line.split()) >= max(min_words, 0)]
        body = "\n".join(lines) or text
        return True, f"## {url}\n{body}"
