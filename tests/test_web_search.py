"""web_search against local servers that answer like each engine's public endpoint."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from app.config import SearchSettings
from app.exceptions import ToolError
from app.tool.search import (
    BaiduSearchEngine,
    BingSearchEngine,
    DuckDuckGoSearchEngine,
    GoogleSearchEngine,
    SearXNGSearchEngine,
)
from app.tool.web_search import WebSearch
from tests.web_fixtures import WebServer

pytest.importorskip("bs4")  # the engines parse result pages with it (the search extra)

GOOGLE = """<html><body>
<div class="ezO2md"><a href="/url?q=https://python.org/&amp;sa=U&amp;ved=x">
  <span class="CVA68e">Welcome to Python</span></a>
  <span class="FrIlee">The official home</span></div>
<div class="ezO2md"><a href="/url?q=https://docs.python.org/3/&amp;sa=U">
  <span class="CVA68e">Python docs</span></a><span class="FrIlee">Documentation</span></div>
<a href="/search?q=next">Next page</a></body></html>"""

BING = """<html><body><ol id="b_results">
<li class="b_algo"><h2><a
  href="https://www.bing.com/ck/a?!&amp;p=1&amp;u=a1aHR0cHM6Ly9weXRob24ub3JnLw&amp;ntb=1"
  >Python.org</a></h2>
  <div class="b_caption"><p>Python home page</p></div></li>
<li class="b_algo"><h2><a href="https://wiki.python.org/">Python wiki</a></h2>
  <p>Community wiki</p></li>
</ol></body></html>"""

BAIDU = """<html><body>
<div class="result c-container" id="1"><h3 class="t">
  <a href="http://www.baidu.com/link?url=abc">Python 官网</a></h3>
  <div class="c-abstract">Python 编程语言</div></div>
<div class="result c-container" id="2"><h3 class="t">
  <a href="http://www.baidu.com/link?url=def">教程</a></h3>
  <span class="content-right_8Zs40">入门教程</span></div></body></html>"""

DDG = """<html><body>
<div class="result results_links result--ad"><a class="result__a" href="https://ads.example/">Ad</a></div>
<div class="result results_links"><h2><a class="result__a"
  href="//duckduckgo.com/l/?uddg=https%3A%2F%2Fpython.org%2F&amp;rut=1">Python.org</a></h2>
  <a class="result__snippet">The official site</a></div>
<div class="result results_links"><h2><a class="result__a" href="https://pypi.org/">PyPI</a></h2>
  <a class="result__snippet">Package index</a></div></body></html>"""

SEARXNG = {
    "query": "python",
    "results": [
        {"url": "https://python.org/", "title": "Python", "content": "Home", "engine": "brave"},
        {"url": "https://peps.python.org/", "title": "PEPs", "content": "Proposals"},
    ],
}


@pytest.fixture
def web() -> Iterator[WebServer]:
    with WebServer() as server:
        yield server


def _search(
    web: WebServer, engine: str = "Google", fallbacks: list[str] | None = None, **settings
) -> WebSearch:
    return WebSearch(
        settings=SearchSettings(
            **{
                "engine": engine,
                "fallback_engines": fallbacks or [],
                "retry_delay": 0,
                "max_retries": 0,
                "timeout": 3,
                **settings,
            }
        ),
        engines={
            "Google": GoogleSearchEngine(web.url + "/google"),
            "Bing": BingSearchEngine(web.url + "/bing"),
            "Baidu": BaiduSearchEngine(web.url + "/baidu"),
            "DuckDuckGo": DuckDuckGoSearchEngine(web.url + "/ddg"),
            "SearXNG": SearXNGSearchEngine(web.url + "/searx"),
        },
    )


@pytest.mark.parametrize(
    ("engine", "path", "page", "first_url", "first_title", "first_desc"),
    [
        (
            "Google",
            "/google/search",
            GOOGLE,
            "https://python.org/",
            "Welcome to Python",
            "The official home",
        ),
        ("Bing", "/bing/search", BING, "https://python.org/", "Python.org", "Python home page"),
        (
            "Baidu",
            "/baidu/s",
            BAIDU,
            "http://www.baidu.com/link?url=abc",
            "Python 官网",
            "Python 编程语言",
        ),
        ("DuckDuckGo", "/ddg/html/", DDG, "https://python.org/", "Python.org", "The official site"),
    ],
)
async def test_each_engine_reads_its_result_page(
    web, engine, path, page, first_url, first_title, first_desc
) -> None:
    web.html(path, page)
    response = await _search(web, engine, fallbacks=[]).execute(query="python", num_results=2)
    assert not response.error, response.error
    first = response.results[0]
    assert (first.url, first.title, first.description) == (first_url, first_title, first_desc)
    assert len(response.results) == 2 and first.source == engine and first.position == 1
    assert f"1. {first_title}" in response.output and f"URL: {first_url}" in response.output
    assert f"Engine: {engine}" in response.output
    request = web.hits(path)[-1]
    sent = {**request["query"], **request["form"]}
    assert "python" in sent.values()


async def test_lang_and_country_reach_the_engines(web) -> None:
    web.html("/google/search", GOOGLE)
    web.html("/bing/search", BING)
    web.html("/ddg/html/", DDG)
    await _search(web, "Google").execute(query="q", lang="de", country="at")
    assert {k: web.hits("/google/search")[-1]["query"][k] for k in ("hl", "gl")} == {
        "hl": "de",
        "gl": "at",
    }
    await _search(web, "Bing").execute(query="q", lang="fr", country="ca")
    assert web.hits("/bing/search")[-1]["query"]["setlang"] == "fr"
    assert web.hits("/bing/search")[-1]["query"]["cc"] == "ca"
    await _search(web, "DuckDuckGo", lang="en", country="uk").execute(query="q")
    assert web.hits("/ddg/html/")[-1]["form"]["kl"] == "uk-en"


async def test_searxng_json_api(web) -> None:
    web.routes["/searx/search"] = (200, "application/json", json.dumps(SEARXNG))
    response = await _search(web, "SearXNG").execute(query="python", lang="de", country="de")
    assert [r.url for r in response.results] == ["https://python.org/", "https://peps.python.org/"]
    query = web.hits("/searx/search")[-1]["query"]
    assert query["format"] == "json" and query["language"] == "de-DE"
    web.html("/searx/search", "<html>json disabled</html>")
    failed = await _search(web, "SearXNG").execute("python", rounds=1)
    assert "format=json" in failed.error


async def test_searxng_without_url_is_left_out_of_the_order() -> None:
    tool = WebSearch(settings=SearchSettings(engine="SearXNG"))
    assert [e.name for e in tool.engine_order()] == ["DuckDuckGo", "Baidu", "Bing", "Google"]
    tool = WebSearch(settings=SearchSettings(engine="searxng", searxng_url="http://127.0.0.1:1"))
    assert tool.engine_order()[0].name == "SearXNG"
    assert [e.name for e in tool.engine_order()][1:] == ["DuckDuckGo", "Baidu", "Bing", "Google"]


async def test_failing_engines_fall_back_in_order(web) -> None:
    web.routes["/google/search"] = (429, "text/html", "slow down")
    web.html("/ddg/html/", "<html><body>If this error persists, anomaly detected</body></html>")
    web.html("/baidu/s", "<html><body>nothing here</body></html>")
    web.html("/bing/search", BING)
    response = await _search(web, "Google", ["DuckDuckGo", "Baidu", "Bing"]).execute(query="x")
    assert not response.error and response.results[0].source == "Bing"
    assert "Google: HTTP 429" in response.output
    assert "DuckDuckGo: DuckDuckGo flagged" in response.output
    assert "Baidu: no results" in response.output
    order = [r["path"] for r in web.requests]
    assert order == ["/google/search", "/ddg/html/", "/baidu/s", "/bing/search"]


async def test_total_failure_gives_one_clear_result_after_the_retries(web) -> None:
    for path in ("/google/search", "/bing/search", "/baidu/s", "/ddg/html/"):
        web.routes[path] = (503, "text/plain", "down")
    tool = _search(web, "Google", ["Bing"])
    tool.settings.max_retries = 1
    response = await tool.execute(query="anything")
    assert response.results == [] and response.output is None
    assert response.error.startswith("All search engines failed for 'anything'")
    for name in ("Google: HTTP 503", "Bing: HTTP 503", "Baidu: HTTP 503", "DuckDuckGo: HTTP 503"):
        assert name in response.error
    assert len(web.hits("/google/search")) == 2  # one more round after the first


async def test_unreachable_and_slow_engines_fail_over(web) -> None:
    web.hanging.add("/google/search")
    web.html("/bing/search", BING)
    tool = WebSearch(
        settings=SearchSettings(
            engine="DuckDuckGo",
            fallback_engines=["Google", "Bing"],
            retry_delay=0,
            max_retries=0,
            timeout=0.5,
        ),
        engines={
            "DuckDuckGo": DuckDuckGoSearchEngine("http://127.0.0.1:9"),
            "Google": GoogleSearchEngine(web.url + "/google"),
            "Bing": BingSearchEngine(web.url + "/bing"),
        },
    )
    response = await tool.execute(query="x")
    assert response.results[0].source == "Bing"
    assert "DuckDuckGo: request failed" in response.output
    assert "Google: timed out" in response.output


async def test_fetch_content_returns_readable_text_with_limits(web) -> None:
    good = web.html(
        "/a",
        "<html><head><style>.x{}</style><script>var hidden=1;</script></head>"
        "<body><nav>menu</nav><h1>Title A</h1><p>Body text A</p></body></html>",
    )
    big = web.html("/big", "<html><body>" + "<p>word</p>" * 20_000 + "</body></html>")
    web.hanging.add("/slow")
    web.routes["/pdf"] = (200, "application/pdf", b"%PDF-1.4")
    links = "".join(
        f'<li class="b_algo"><h2><a href="{url}">{name}</a></h2><p>d</p></li>'
        for name, url in (
            ("A", good),
            ("Big", big),
            ("Slow", web.url + "/slow"),
            ("Pdf", web.url + "/pdf"),
        )
    )
    web.html("/bing/search", f"<html><body>{links}</body></html>")
    tool = _search(web, "Bing", timeout=1)
    response = await tool.execute(query="x", num_results=4, fetch_content=True)
    by_title = {r.title: r.raw_content for r in response.results}
    assert "Title A" in by_title["A"] and "Body text A" in by_title["A"]
    assert "hidden" not in by_title["A"] and "menu" not in by_title["A"]
    assert len(by_title["Big"]) <= 10_100 and "cut at 10000 characters" in by_title["Big"]
    assert "could not fetch" in by_title["Slow"] and "timed out" in by_title["Slow"]
    assert "not a text page (application/pdf)" in by_title["Pdf"]
    assert "Content: Title A" in response.output


async def test_bad_arguments_are_tool_errors(web) -> None:
    with pytest.raises(ToolError, match="non-empty"):
        await _search(web).execute(query="  ")
    with pytest.raises(ToolError, match="num_results"):
        await _search(web).execute(query="x", num_results="many")
