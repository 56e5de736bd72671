"""browser_use in a real headless Chromium against pages served from 127.0.0.1.

One browser for the whole module (Chromium takes seconds to start on two cores), so the tests
share one event loop and run in order. The temp dir is redirected to a private directory that
must be empty, with no browser process left, when the module ends.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import signal
import struct
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio

from app.config import BrowserSettings, SearchSettings
from app.exceptions import ToolError
from app.llm import LLM
from app.testing import ScriptedLLMServer, call, tool_calls
from app.tool.browser_use_tool import BrowserUseTool
from app.tool.search import GoogleSearchEngine
from app.tool.web_search import WebSearch
from tests.conftest import llm_settings
from tests.web_fixtures import WebServer, isolated_tempdir, processes_mentioning

pytest.importorskip("browser_use")  # the browser extra

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="module")]

MAIN = """<html><head><title>Test Page</title></head><body>
<h1>Welcome</h1>
<a id="next" href="/second">Go to the second page</a>
<form action="/echo" method="get">
  <input id="q" name="q" type="text" placeholder="search words">
  <select id="fruit" name="fruit"><option value="a">Apple</option>
    <option value="b">Banana</option><option value="c">Cherry</option></select>
</form>
<p>The price of the blue widget is 42 euros.</p>
<div style="height: 4000px"></div>
<p id="deep">Deep text near the bottom</p>
<script>var noisy = "SCRIPT-ONLY-TEXT";</script>
</body></html>"""


def _ids(state: dict[str, Any]) -> dict[str, int]:
    """Element index by a word of the element's description (id or text)."""
    found: dict[str, int] = {}
    for line in state["interactive_elements"].splitlines():
        match = re.search(r"\[(\d+)\]<(\w+)([^>]*)", line)
        if match:
            attrs = match.group(3)
            ident = re.search(r"id=(\w+)", attrs)
            found[ident.group(1) if ident else match.group(2)] = int(match.group(1))
    return found


@pytest.fixture(scope="module")
def web() -> Iterator[WebServer]:
    with WebServer() as server:
        server.html("/main", MAIN)
        server.html(
            "/second",
            "<html><head><title>Second</title></head><body><p>Second page</p></body></html>",
        )
        server.routes["/echo"] = lambda r: (
            200,
            "text/html",
            f"<html><head><title>Echo</title></head><body>"
            f"q={r['query'].get('q')} fruit={r['query'].get('fruit')}</body></html>",
        )
        server.hanging.add("/never")
        yield server


@pytest.fixture(scope="module")
def llm_server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer() as server:
        yield server


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser(web: WebServer, llm_server: ScriptedLLMServer) -> AsyncIterator[BrowserUseTool]:
    with isolated_tempdir():
        search = WebSearch(
            settings=SearchSettings(engine="Google", fallback_engines=[], retry_delay=0),
            engines={"google": GoogleSearchEngine(base_url=web.url + "/google")},
        )
        tool = BrowserUseTool(
            settings=BrowserSettings(headless=True, action_timeout=20),
            llm=LLM.create(llm_config=llm_settings(llm_server)),
            web_search_tool=search,
        )
        try:
            yield tool
        finally:
            await tool.cleanup()


async def state_of(tool: BrowserUseTool) -> tuple[dict[str, Any], str | None]:
    result = await tool.get_current_state()
    assert not result.error, result.error
    return json.loads(result.output), result.base64_image


async def test_state_before_start_is_a_clear_failure(browser: BrowserUseTool) -> None:
    result = await browser.get_current_state()
    assert result.error and "not been opened" in result.error


async def test_navigate_lists_elements_and_screenshot(browser: BrowserUseTool, web) -> None:
    result = await browser.execute(action="go_to_url", url=web.url + "/main")
    assert "Test Page" in result.output and "/main" in result.output
    state, image = await state_of(browser)
    assert state["url"] == web.url + "/main" and state["title"] == "Test Page"
    assert len(state["tabs"]) == 1 and state["tabs"][0]["active"]
    assert {"next", "q", "fruit"} <= set(_ids(state))
    assert state["scroll_info"]["pixels_above"] == 0
    assert state["scroll_info"]["pixels_below"] > 3000
    raw = base64.b64decode(image)
    assert raw[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", raw[16:24])
    assert width > 100 and height > 100


async def test_input_select_and_send_keys_submit_the_form(browser: BrowserUseTool, web) -> None:
    await browser.execute(action="go_to_url", url=web.url + "/main")
    ids = _ids((await state_of(browser))[0])
    await browser.execute(action="input_text", index=ids["q"], text="hello world")
    options = await browser.execute(action="get_dropdown_options", index=ids["fruit"])
    assert all(name in options.output for name in ("Apple", "Banana", "Cherry"))
    picked = await browser.execute(
        action="select_dropdown_option", index=ids["fruit"], text="Banana"
    )
    assert "Banana" in picked.output
    await browser.execute(action="input_text", index=ids["q"], text="hello world")
    await browser.execute(action="send_keys", keys="Enter")
    state, _ = await state_of(browser)
    assert state["title"] == "Echo"
    assert web.hits("/echo")[-1]["query"] == {"q": "hello world", "fruit": "b"}


async def test_click_by_index_changes_the_page(browser: BrowserUseTool, web) -> None:
    await browser.execute(action="go_to_url", url=web.url + "/main")
    ids = _ids((await state_of(browser))[0])
    result = await browser.execute(action="click_element", index=ids["next"])
    assert "Second" in result.output
    state, _ = await state_of(browser)
    assert state["url"] == web.url + "/second"


async def test_go_back_and_refresh(browser: BrowserUseTool, web) -> None:
    await browser.execute(action="go_to_url", url=web.url + "/main")
    await browser.execute(action="go_to_url", url=web.url + "/second")
    back = await browser.execute(action="go_back")
    assert "Test Page" in back.output
    before = len(web.hits("/main"))
    await browser.execute(action="refresh")
    assert len(web.hits("/main")) == before + 1
    assert (await state_of(browser))[0]["url"] == web.url + "/main"


async def test_scroll_by_pixels_and_to_text(browser: BrowserUseTool, web) -> None:
    await browser.execute(action="go_to_url", url=web.url + "/main")
    await browser.execute(action="scroll_down", scroll_amount=600)
    assert (await state_of(browser))[0]["scroll_info"]["pixels_above"] == 600
    await browser.execute(action="scroll_up", scroll_amount=200)
    assert (await state_of(browser))[0]["scroll_info"]["pixels_above"] == 400
    result = await browser.execute(action="scroll_to_text", text="Deep text near the bottom")
    assert "Deep text" in result.output
    assert (await state_of(browser))[0]["scroll_info"]["pixels_above"] > 3000
    with pytest.raises(ToolError, match="not found"):
        await browser.execute(action="scroll_to_text", text="words that are nowhere")


async def test_tabs_open_switch_close(browser: BrowserUseTool, web) -> None:
    await browser.execute(action="go_to_url", url=web.url + "/main")
    opened = await browser.execute(action="open_tab", url=web.url + "/second")
    assert "Second" in opened.output
    state, _ = await state_of(browser)
    assert [t["active"] for t in state["tabs"]] == [False, True]
    switched = await browser.execute(action="switch_tab", tab_id=0)
    assert "Test Page" in switched.output
    assert [t["active"] for t in (await state_of(browser))[0]["tabs"]] == [True, False]
    with pytest.raises(ToolError, match="no tab 7"):
        await browser.execute(action="switch_tab", tab_id=7)
    closed = await browser.execute(action="close_tab")
    assert "Second" in closed.output
    state, _ = await state_of(browser)
    assert len(state["tabs"]) == 1 and state["url"] == web.url + "/second"


async def test_extract_content_sends_markdown_to_the_model(
    browser: BrowserUseTool, web, llm_server: ScriptedLLMServer
) -> None:
    await browser.execute(action="go_to_url", url=web.url + "/main")
    llm_server.push(
        tool_calls(
            call(
                "extract_content",
                {
                    "extracted_content": {
                        "text": "The blue widget costs 42 euros.",
                        "metadata": {"source": "price paragraph"},
                    }
                },
            )
        )
    )
    result = await browser.execute(action="extract_content", goal="price of the blue widget")
    assert "The blue widget costs 42 euros." in result.output
    assert "price of the blue widget" in result.output and "/main" in result.output
    request = llm_server.requests[-1].body
    prompt = request["messages"][-1]["content"]
    assert "42 euros" in prompt and "price of the blue widget" in prompt
    assert "<p>" not in prompt and "<html" not in prompt and "SCRIPT-ONLY-TEXT" not in prompt
    assert request["tool_choice"] == "required"


async def test_extract_content_is_capped(browser: BrowserUseTool, web, llm_server) -> None:
    web.html("/long", "<html><body>" + "<p>filler words here</p>" * 2000 + "</body></html>")
    await browser.execute(action="go_to_url", url=web.url + "/long")
    llm_server.push(tool_calls(call("extract_content", {"extracted_content": {"text": "x"}})))
    await browser.execute(action="extract_content", goal="anything")
    prompt = llm_server.requests[-1].body["messages"][-1]["content"]
    assert len(prompt) < 2000 + 1000  # max_content_length plus the instructions
    assert "first 2000 of" in prompt


async def test_web_search_action_opens_the_first_result(browser: BrowserUseTool, web) -> None:
    target = web.html("/found", "<html><head><title>Found it</title></head><body>x</body></html>")
    web.html(
        "/google/search",
        f'<html><body><div class="ezO2md"><a href="/url?q={target}&sa=U">'
        f'<span class="CVA68e">Found it</span></a>'
        f'<span class="FrIlee">the page</span></div></body></html>',
    )
    result = await browser.execute(action="web_search", query="find it")
    assert "Found it" in result.output and target in result.output
    assert (await state_of(browser))[0]["url"] == target
    assert web.hits("/google/search")[-1]["query"]["q"] == "find it"


async def test_model_mistakes_are_clear_errors(browser: BrowserUseTool, web) -> None:
    await browser.execute(action="go_to_url", url=web.url + "/main")
    with pytest.raises(ToolError, match="no element with index 9999"):
        await browser.execute(action="click_element", index=9999)
    with pytest.raises(ToolError, match="needs: url"):
        await browser.execute(action="go_to_url")
    with pytest.raises(ToolError, match="Unknown action 'fly'"):
        await browser.execute(action="fly")
    with pytest.raises(ToolError, match="Could not load"):
        await browser.execute(action="go_to_url", url="http://127.0.0.1:9/nothing")


FILE_MARKER = "HOST-FILE-CONTENT-77ab"


@pytest.fixture(scope="module")
def host_file(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("host") / "config.toml"
    path.write_text(f'api_key = "{FILE_MARKER}"\n')
    return str(path)


async def test_file_urls_in_every_spelling_are_refused(
    browser: BrowserUseTool, web, host_file: str
) -> None:
    await browser.execute(action="go_to_url", url=web.url + "/main")
    spellings = [
        f"file://{host_file}",
        f"FILE://{host_file}",
        f"file://localhost{host_file}",
        f"file:{host_file}",
        f" file:{host_file}",
        f"fi\tle://{host_file}",
        f"view-source:file://{host_file}",
        f"filesystem:file://{host_file}",
        f"blob:file://{host_file}",
        f"%66ile://{host_file}",
        f"%2566ile://{host_file}",
        "chrome://settings",
        "javascript:alert(1)",
    ]
    for url in spellings:
        for action in ("go_to_url", "open_tab"):
            with pytest.raises(ToolError, match="only opens web pages"):
                await browser.execute(action=action, url=url)
    state, _ = await state_of(browser)
    assert state["url"] == web.url + "/main" and len(state["tabs"]) == 1
    assert FILE_MARKER not in json.dumps(state)


async def test_a_page_cannot_lead_to_or_read_host_files(
    browser: BrowserUseTool, web, llm_server: ScriptedLLMServer, host_file: str
) -> None:
    assert BrowserSettings().disable_security is False  # the safe default
    web.html(
        "/lure",
        f"""<html><head><title>Lure</title></head><body>
<a id="next" href="file://{host_file}">open the config</a><p id="out">nothing</p>
<script>
  try {{
    const x = new XMLHttpRequest();
    x.open("GET", "file://{host_file}", false);
    x.send();
    document.getElementById("out").textContent = "READ:" + x.responseText;
  }} catch (e) {{ document.getElementById("out").textContent = "blocked"; }}
</script></body></html>""",
    )
    await browser.execute(action="go_to_url", url=web.url + "/lure")
    state, _ = await state_of(browser)
    try:
        await browser.execute(action="click_element", index=_ids(state)["next"])
    except ToolError as e:
        assert FILE_MARKER not in e.message
    state, _ = await state_of(browser)
    assert not state["url"].startswith("file:") and FILE_MARKER not in json.dumps(state)
    await browser.execute(action="go_to_url", url=web.url + "/lure")
    llm_server.push(tool_calls(call("extract_content", {"extracted_content": {"text": "ok"}})))
    await browser.execute(action="extract_content", goal="what does the page say")
    prompt = llm_server.requests[-1].body["messages"][-1]["content"]
    assert "Lure" in prompt or "open the config" in prompt
    assert FILE_MARKER not in prompt


async def page_eval(tool: BrowserUseTool, expression: str) -> Any:
    cdp = await tool.runtime.session.get_or_create_cdp_session()
    reply = await cdp.cdp_client.send.Runtime.evaluate(
        params={"expression": expression, "returnByValue": True}, session_id=cdp.session_id
    )
    return (reply.get("result") or {}).get("value")


async def until_page(tool: BrowserUseTool, expression: str, timeout: float = 20.0) -> Any:
    """Wait for a page condition (an observable event), polling the page itself."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = await page_eval(tool, expression)
        if value or asyncio.get_running_loop().time() > deadline:
            return value
        await asyncio.sleep(0.1)  # polls the page for the condition; noqa: sleep-ok


async def test_the_browser_itself_refuses_local_requests_without_web_security(
    web, host_file: str, llm_server: ScriptedLLMServer
) -> None:
    """With ``disable_security`` (web security off), a page's own iframe, fetch and
    navigation to ``file:`` are failed inside the browser, and the tool says so."""
    target = f"file://{host_file}"
    web.html(
        "/sneaky",
        f"""<html><head><title>Sneaky</title></head><body>
<p id="out">pending</p><iframe id="f" src="{target}"></iframe>
<script>
  fetch("{target}").then(r => r.text())
    .then(t => {{ document.getElementById("out").textContent = "READ:" + t; }})
    .catch(e => {{ document.getElementById("out").textContent = "fetch refused"; }});
</script></body></html>""",
    )
    web.html(
        "/leave",
        f"""<html><head><title>Leave</title></head><body>
<script>location.href = "{target}";</script></body></html>""",
    )
    tool = BrowserUseTool(
        settings=BrowserSettings(headless=True, action_timeout=20, disable_security=True),
        llm=LLM.create(llm_config=llm_settings(llm_server)),
    )
    try:
        seen = [(await tool.execute(action="go_to_url", url=web.url + "/sneaky")).output]
        out = await until_page(
            tool,
            "document.getElementById('out').textContent !== 'pending'"
            " && document.getElementById('out').textContent",
        )
        assert out == "fetch refused"
        frame = await page_eval(
            tool,
            "(() => { try { const d = document.getElementById('f')"
            ".contentDocument; return d ? d.body.innerText : ''; }"
            " catch (e) { return 'cross-origin'; } })()",
        )
        assert FILE_MARKER not in str(frame)
        state = await tool.get_current_state()
        seen.append(state.output)
        assert FILE_MARKER not in state.output
        assert any(
            f"Blocked: the page tried to open local addresses, which the browser "
            f"refused: {target}" in text
            for text in seen
        ), seen

        # The model's own go_to_url is refused before the browser; a page's navigation ends
        # on an error or blank page, never the file, and the tool says where it was going.
        try:
            seen = [(await tool.execute(action="go_to_url", url=web.url + "/leave")).output]
        except ToolError as e:
            seen = [e.message]
        await until_page(tool, "!location.href.includes('/leave')")
        state = await tool.get_current_state()
        assert FILE_MARKER not in state.output and FILE_MARKER not in "".join(seen)
        assert not json.loads(state.output)["url"].startswith("file:")

        # Below the tool: even a navigation the browser itself starts (which Chromium would
        # allow) is failed by the guard before the file is read.
        cdp = await tool.runtime.session.get_or_create_cdp_session()
        tool.runtime.take_blocked()
        await cdp.cdp_client.send.Page.navigate(params={"url": target}, session_id=cdp.session_id)
        await until_page(tool, "document.readyState === 'complete'")
        assert FILE_MARKER not in str(await page_eval(tool, "document.documentElement.innerText"))
        assert tool.runtime.take_blocked() == [target]
    finally:
        await tool.cleanup()


async def test_extract_content_request_is_redacted(
    browser: BrowserUseTool, web, llm_server: ScriptedLLMServer
) -> None:
    from app.logger import register_secret

    secret = "registered-secret-value-3f9d2a"
    register_secret(secret)
    web.html(
        "/leaky",
        f"<html><body><p>The token is {secret} and sk-abcdef0123456789abcdef"
        "0123456789</p></body></html>",
    )
    await browser.execute(action="go_to_url", url=web.url + "/leaky")
    llm_server.push(tool_calls(call("extract_content", {"extracted_content": {"text": "ok"}})))
    await browser.execute(action="extract_content", goal="the token")
    prompt = llm_server.requests[-1].body["messages"][-1]["content"]
    assert "The token is" in prompt
    assert secret not in prompt and "sk-abcdef0123456789abcdef0123456789" not in prompt


async def test_a_page_that_never_loads_times_out(browser: BrowserUseTool, web) -> None:
    assert browser.settings is not None
    browser.settings.action_timeout = 3
    try:
        with pytest.raises(ToolError, match="did not load within 3 s"):
            await browser.execute(action="go_to_url", url=web.url + "/never")
    finally:
        browser.settings.action_timeout = 20
    result = await browser.execute(action="go_to_url", url=web.url + "/second")
    assert "Second" in result.output


async def test_recovers_after_chromium_is_killed(browser: BrowserUseTool, web) -> None:
    await browser.execute(action="go_to_url", url=web.url + "/main")
    chromium = browser.runtime.chromium
    assert chromium is not None
    old_dir = str(chromium.directory)
    os.killpg(chromium.pid, signal.SIGKILL)
    result = await browser.execute(action="go_to_url", url=web.url + "/second")
    assert "a new browser was started" in result.output and "Second" in result.output
    assert browser.runtime.chromium is not None and browser.runtime.chromium.pid != chromium.pid
    assert not processes_mentioning(old_dir)
    assert not os.path.exists(old_dir)  # noqa: ASYNC240


async def test_cleanup_kills_chromium_and_the_tool_starts_again(
    browser: BrowserUseTool, web
) -> None:
    await browser.execute(action="go_to_url", url=web.url + "/main")
    chromium = browser.runtime.chromium
    assert chromium is not None
    await browser.cleanup()
    assert not processes_mentioning(str(chromium.directory))
    assert not chromium.directory.exists()
    assert not browser.is_started
    result = await browser.execute(action="go_to_url", url=web.url + "/second")
    assert "Second" in result.output and "new browser" not in result.output
