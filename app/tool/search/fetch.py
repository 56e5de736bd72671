"""``fetch_content``: a result page as readable text, with a timeout and a size cap."""

from __future__ import annotations

from typing import Any

from app.exceptions import ToolError
from app.install_hint import pip_install
from app.tool.search.base import USER_AGENT

MAX_BYTES = 2_000_000
MAX_CHARS = 10_000
_NOISE = ("script", "style", "noscript", "nav", "header", "footer", "aside", "form", "svg")


def import_httpx(tool: str) -> Any:
    """httpx, once beautifulsoup4 is known to be there too (both: the ``search`` extra)."""
    try:
        import bs4  # noqa: F401  (checked here so the message names both)
        import httpx
    except ImportError as e:
        raise ToolError(
            f"{tool} needs httpx and beautifulsoup4 ({e}); install the extra: "
            f"{pip_install('search')}"
        ) from e
    return httpx


def html_to_text(html: str) -> str:
    """Visible text of an HTML page: scripts, styles and navigation removed, blank lines folded."""
    from bs4 import BeautifulSoup  # the search extra

    soup = BeautifulSoup(html, "html.parser")
    for tag in soup(_NOISE):
        tag.decompose()
    lines = (" ".join(line.split()) for line in soup.get_text("\n").splitlines())
    return "\n".join(line for line in lines if line)


async def fetch_page_text(
    client: Any, url: str, *, timeout: float, max_bytes: int = MAX_BYTES, max_chars: int = MAX_CHARS
) -> str:
    """The page's text (HTML stripped), at most ``max_chars``; raises ``ValueError`` on failure."""
    import httpx  # the search extra

    body = bytearray()
    try:
        async with client.stream(
            "GET", url, timeout=timeout, headers={"User-Agent": USER_AGENT}
        ) as response:
            if response.status_code >= 400:
                raise ValueError(f"HTTP {response.status_code}")
            kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
            if kind and not (
                kind.startswith("text/") or kind in {"application/xhtml+xml", "application/json"}
            ):
                raise ValueError(f"not a text page ({kind})")
            async for chunk in response.aiter_bytes():
                body.extend(chunk)
                if len(body) >= max_bytes:
                    break
            encoding = response.encoding or "utf-8"
    except httpx.TimeoutException as e:
        raise ValueError(f"timed out after {timeout:g} s") from e
    except httpx.HTTPError as e:
        raise ValueError(f"{type(e).__name__}: {e}") from e
    text = body[:max_bytes].decode(encoding, errors="replace")
    if kind in {"text/html", "application/xhtml+xml", ""} or "<html" in text[:1000].lower():
        text = html_to_text(text)
    text = text.strip()
    if len(text) > max_chars:
        text = text[:max_chars] + f"\n... [cut at {max_chars} characters]"
    return text
