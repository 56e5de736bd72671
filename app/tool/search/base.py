"""What every search engine client shares: one result shape, one error, one HTTP helper; each
engine has an overridable ``base_url`` (a self-hosted instance, a local test server)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel

if TYPE_CHECKING:
    from bs4.element import Tag

USER_AGENT = (
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/124.0 Safari/537.36"
)


class SearchItem(BaseModel):
    """One hit: where it points, what it is called, what the engine says about it."""

    title: str
    url: str
    description: str = ""


class SearchEngineError(Exception):
    """One engine could not answer (blocked, down, changed its page); the next one is tried."""


def clean_text(text: str | None) -> str:
    return " ".join((text or "").split())


def link_target(link: Tag) -> str:
    """A link's ``href`` ("" without one); bs4 types attributes as possibly multi-valued."""
    href = link.get("href")
    return href if isinstance(href, str) else ""


class WebSearchEngine:
    """Base of the engine clients: ``search()`` returns hits or raises ``SearchEngineError``."""

    name: ClassVar[str] = "engine"
    default_base_url: ClassVar[str] = ""
    user_agent: ClassVar[str] = USER_AGENT

    def __init__(self, base_url: str | None = None) -> None:
        self.base_url = (base_url or self.default_base_url).rstrip("/")

    @property
    def configured(self) -> bool:
        return bool(self.base_url)

    async def search(
        self, client: Any, query: str, *, num_results: int, lang: str, country: str
    ) -> list[SearchItem]:
        raise NotImplementedError

    def _results(
        self,
        html: str,
        blocks: str,
        link: str,
        descriptions: tuple[str, ...],
        unwrap: Callable[[str], str] = str,
    ) -> list[SearchItem]:
        """One hit per result block: its first ``link``, the first of ``descriptions`` found;
        a URL already listed is skipped."""
        from bs4 import BeautifulSoup  # the search extra

        items: list[SearchItem] = []
        for block in BeautifulSoup(html, "html.parser").select(blocks):
            anchor = block.select_one(link)
            url = unwrap(link_target(anchor)) if anchor is not None else ""
            if anchor is None or not url or any(item.url == url for item in items):
                continue
            desc = next(filter(None, map(block.select_one, descriptions)), None)
            items.append(
                SearchItem(
                    title=clean_text(anchor.get_text(" ")),
                    url=url,
                    description=clean_text(desc.get_text(" ")) if desc else "",
                )
            )
        return items

    async def _get_text(self, client: Any, method: str, path: str, **kwargs: Any) -> str:
        """The response body; HTTP errors and transport failures become ``SearchEngineError``."""
        import httpx  # the search extra

        headers = {"User-Agent": self.user_agent, **kwargs.pop("headers", {})}
        try:
            response = await client.request(
                method, f"{self.base_url}{path}", headers=headers, **kwargs
            )
        except httpx.TimeoutException as e:
            raise SearchEngineError(f"timed out ({type(e).__name__})") from e
        except httpx.HTTPError as e:
            raise SearchEngineError(f"request failed: {type(e).__name__}: {e}") from e
        if response.status_code >= 400:
            raise SearchEngineError(f"HTTP {response.status_code}")
        return response.text

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.base_url!r})"
