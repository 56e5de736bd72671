"""The web UI in a real Chromium (Playwright) against the real server and the scripted LLM.

Every wait is on page state (Playwright's auto-waiting ``expect``) or on /proc, never a sleep.
The computer-panel test takes the screenshot the docs show; it writes ``docs/web-ui.png`` only
when ``OPENMANUS_UPDATE_DOCS_SCREENSHOT=1`` is set (a normal run writes a temporary copy).
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.testing import ScriptedLLMServer, call, slow, text, tool_calls
from app.testing.wire import CapturedRequest
from tests.proc_utils import processes_in
from tests.test_run_flow_e2e import plan_call
from tests.web_fixtures import WebServer
from tests.web_ui_helpers import WebApp, children_of, commands_in, free_port, wait_until

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

CHROMIUM = "/usr/bin/chromium"
ROOT = Path(__file__).resolve().parent.parent
SCREENSHOT = ROOT / "docs" / "web-ui.png"
#: Set to 1 to refresh the tracked docs screenshot (otherwise it goes to a temp dir).
UPDATE_SCREENSHOT = "OPENMANUS_UPDATE_DOCS_SCREENSHOT"
#: Prices for the scripted model, so every message shows a cost (USD per million tokens).
APP_CONFIG = """[pricing."gpt-4o-mini"]
input = 0.15
output = 0.6

[browser]
headless = true"""

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Debian's chromium package"),
]


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory, llm: ScriptedLLMServer) -> Iterator[WebApp]:
    web = WebApp(tmp_path_factory.mktemp("webui"), llm.base_url, extra_config=APP_CONFIG).start()
    yield web
    web.stop()


#: The widths each behaviour of issue 37 is checked at: a laptop's window, and a narrow one.
WIDTHS = pytest.mark.parametrize("page", [1400, 900], indirect=True, ids=lambda w: f"{w}px")


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with playwright_api.sync_playwright() as pw:
        chromium = pw.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=[
                "--no-sandbox",
                "--disable-background-networking",
                "--disable-component-update",
                "--no-first-run",
                "--disable-sync",
            ],
        )
        yield chromium
        chromium.close()


@pytest.fixture
def page(
    request: pytest.FixtureRequest, browser: object, app: WebApp, llm: ScriptedLLMServer
) -> Iterator[object]:
    """A logged-in page, 1500 px wide unless the test asks for a width (``WIDTHS``)."""
    assert llm.remaining == 0, "a previous test left replies unused"
    context = browser.new_context(  # type: ignore[attr-defined]
        viewport={"width": getattr(request, "param", 1500), "height": 850}, accept_downloads=True
    )
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(app.login_url)  # the token becomes a cookie, then /
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    yield page
    context.close()
    assert not errors, errors


def test_the_login_address_becomes_an_httponly_cookie(browser, app) -> None:
    """Opening the printed address logs in: the token moves into an HttpOnly, SameSite=Strict
    cookie, out of the address bar and the history; without it the page says how to log in."""
    context = browser.new_context()  # type: ignore[attr-defined]
    page = context.new_page()
    refused = page.goto(app.base + "/")
    assert refused is not None and refused.status == 401
    expect(page.locator("body")).to_contain_text("?token=")
    page.goto(app.login_url)
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    assert page.url == app.base + "/" and app.token not in page.url
    cookies = [c for c in context.cookies() if c["name"] == f"openmanus_token_{app.port}"]
    assert len(cookies) == 1 and cookies[0]["value"] == app.token
    assert cookies[0]["httpOnly"] is True and cookies[0]["sameSite"] == "Strict"
    assert page.evaluate("document.cookie") == ""  # no script of the page can read it
    page.go_back()  # the history holds the 401 page and the clean address, not the token
    assert app.token not in page.url
    context.close()


def run_task(page: object, prompt: str, mode: str = "agent") -> None:
    page.select_option("#mode", mode)  # type: ignore[attr-defined]
    page.click("#new-session")  # type: ignore[attr-defined]
    expect(page.locator("#sessions li.current")).to_have_count(1)  # type: ignore[attr-defined]
    page.fill("#prompt", prompt)  # type: ignore[attr-defined]
    page.click("#send")  # type: ignore[attr-defined]


def reload(page: object) -> None:
    """Reload the page: the address keeps the session (``#id``), which is opened again and
    its whole history replayed."""
    page.reload()  # type: ignore[attr-defined]
    expect(page.locator("body")).to_have_attribute("data-ready", "true")  # type: ignore[attr-defined]
    expect(page.locator("#sessions li.current")).to_have_count(1)  # type: ignore[attr-defined]


def test_a_task_streams_text_and_tool_calls(page, llm, app) -> None:
    llm.push(
        tool_calls(
            call("bash", {"command": "echo hello-from-bash"}), content="I will run a command first."
        ),
        tool_calls(call("str_replace_editor", {"command": "view", "path": "missing.txt"})),
        tool_calls(
            call(
                "str_replace_editor",
                {"command": "create", "path": "report.md", "file_text": "# Report\nall good\n"},
            )
        ),
        slow(1.0, text("The report is written: report.md says all good.")),
    )
    run_task(page, "write a short report")
    expect(page.locator(".msg.user")).to_have_text("write a short report")
    expect(page.locator("#status")).to_have_text("running")
    calls = page.locator("#activity details.tool-call")
    expect(calls).to_have_count(3)
    expect(calls.nth(0)).to_have_class("tool-call ok")
    expect(calls.nth(1)).to_have_attribute("data-failed", "true")  # the typed failure flag
    expect(page.locator("#terminal")).to_contain_text("$ echo hello-from-bash")
    expect(page.locator("#terminal")).to_contain_text("hello-from-bash")
    expect(page.locator("#files li.file[data-path='report.md']")).to_be_visible()
    # The model's text arrives token by token into one bubble, then the final answer.
    expect(page.locator(".msg.final")).to_contain_text("report.md says all good.")
    assert (
        page.locator(".msg.assistant .text").filter(has_text="The report is written").count() == 1
    )
    expect(page.locator(".msg.assistant").first).to_contain_text("I will run a command first.")
    expect(page.locator("#status")).to_have_text("finished")
    expect(page.locator("#usage")).to_contain_text("tokens")
    expect(page.locator("#model")).to_contain_text("gpt-4o-mini")
    calls.nth(0).locator("summary").click()
    expect(calls.nth(0).locator(".result")).to_contain_text("hello-from-bash")


def test_a_flow_shows_its_plan_advancing(page, llm) -> None:
    llm.push(
        plan_call("[MANUS] Write notes.txt", "[MANUS] Check notes.txt"),
        tool_calls(
            call(
                "str_replace_editor",
                {"command": "create", "path": "notes.txt", "file_text": "notes\n"},
            )
        ),
        tool_calls(call("terminate", {"status": "success"}), content="notes written"),
        slow(1.0, tool_calls(call("terminate", {"status": "success"}), content="checked")),
        text("Both steps are done."),
    )
    run_task(page, "make notes", mode="flow")
    steps = page.locator("#plan li")
    expect(steps).to_have_count(2)
    expect(steps.nth(0)).to_have_attribute("data-status", "completed")
    expect(steps.nth(1)).to_have_attribute("data-status", "in_progress")
    expect(steps.nth(1)).to_have_attribute("data-status", "completed")
    expect(page.locator(".msg.final")).to_contain_text("Both steps are done.")
    expect(page.locator("#status")).to_have_text("finished")

    def each_step_keeps_its_reply() -> None:
        # Every plan step's agent run starts again at step 1: neither reply may replace the other.
        replies = page.locator(".msg.assistant .text")
        expect(replies.filter(has_text="notes written")).to_have_count(1)
        expect(replies.filter(has_text="checked")).to_have_count(1)

    each_step_keeps_its_reply()
    reload(page)
    expect(page.locator(".msg.final")).to_contain_text("Both steps are done.")
    each_step_keeps_its_reply()


def test_ask_human_question_is_answered_from_the_page(page, llm) -> None:
    llm.push(
        tool_calls(call("ask_human", {"inquire": "Which colour should the logo be?"})),
        text("Making it teal."),
    )
    run_task(page, "design a logo")
    expect(page.locator("#question .question-text")).to_have_text(
        "Which colour should the logo be?"
    )
    page.fill("#answer-input", "teal, please")
    page.click("#answer-send")
    expect(page.locator("#question")).to_be_hidden()
    expect(page.locator(".msg.final")).to_contain_text("Making it teal.")
    tool_message = [m for m in llm.requests[-1].messages if m.get("role") == "tool"][-1]
    assert "teal, please" in str(tool_message["content"])


@WIDTHS
def test_stop_cancels_a_long_task_keeps_its_output_and_leaves_no_process(page, llm, app) -> None:
    """Stop is Ctrl-C: the task ends, its processes go, and what the command printed until
    then stays on the page (the terminal and the call), also after a reload."""
    llm.push(tool_calls(call("bash", {"command": "echo printed-$((6*7)); sleep 300 & sleep 301"})))
    run_task(page, "wait a long time")
    expect(page.locator("#activity details.tool-call.pending")).to_have_count(1)
    sid = page.locator("#sessions li.current").get_attribute("data-id")
    workspace = app.workspace / "web" / sid
    # The sleep runs, so the echo before it has printed.
    wait_until(lambda: commands_in(workspace, b"sleep"), what="the sleep to start")
    page.click("#stop")
    expect(page.locator("#status")).to_have_text("stopped")
    expect(page.locator(".msg.error")).to_contain_text("stopped by the user")
    # The call Stop cut short says so, with what it printed; it is not left pending.
    cut = page.locator("#activity details.tool-call")
    expect(cut).to_have_class("tool-call cancelled")
    expect(cut.locator(".result")).to_contain_text("printed-42")
    expect(cut.locator(".result")).to_contain_text("cancelled")
    expect(page.locator("#terminal")).to_have_text(
        re.compile(r"printed-42\n.*\^C \(cancelled\)\n$", re.S)
    )
    assert processes_in(workspace) == []
    assert children_of(app.pid) == []
    # The session is still usable.
    llm.push(text("Still here."))
    page.fill("#prompt", "are you there?")
    page.click("#send")
    expect(page.locator(".msg.final")).to_contain_text("Still here.")
    reload(page)
    expect(page.locator(".msg.final")).to_contain_text("Still here.")
    expect(page.locator("#activity details.tool-call.cancelled")).to_have_count(1)
    expect(page.locator("#activity details.tool-call.cancelled .result")).to_contain_text(
        "printed-42"
    )
    expect(page.locator("#activity details.tool-call.pending")).to_have_count(0)
    assert_layout_fits(page)


def test_download_a_file_and_upload_one_the_agent_reads(page, llm, app, tmp_path) -> None:
    llm.push(
        tool_calls(
            call(
                "str_replace_editor",
                {"command": "create", "path": "out/result.csv", "file_text": "a,b\n1,2\n"},
            )
        ),
        text("Wrote out/result.csv"),
    )
    run_task(page, "write a csv")
    expect(page.locator(".msg.final")).to_contain_text("Wrote out/result.csv")
    page.locator("#files li.dir[data-path='out'] > span").click()
    page.locator("#files li.file[data-path='out/result.csv'] > span").click()
    expect(page.locator("#preview pre.file-text")).to_have_text("a,b\n1,2\n")
    with page.expect_download() as info:
        page.click("#preview a.download")
    target = tmp_path / "downloaded.csv"
    info.value.save_as(target)
    assert target.read_text() == "a,b\n1,2\n"

    upload = tmp_path / "input.txt"
    upload.write_text("the secret word is pumpkin\n")
    page.set_input_files("#upload-input", str(upload))
    expect(page.locator("#files li.file[data-path='input.txt']")).to_be_visible()
    llm.push(
        tool_calls(call("str_replace_editor", {"command": "view", "path": "input.txt"})),
        text("The word is pumpkin."),
    )
    page.fill("#prompt", "read input.txt")
    page.click("#send")
    expect(page.locator("#activity details.tool-call.ok .result").last).to_contain_text("pumpkin")
    expect(page.locator(".msg.final").last).to_contain_text("The word is pumpkin.")


def test_restart_the_server_and_resume_a_session(browser, llm, tmp_path) -> None:
    app = WebApp(tmp_path, llm.base_url).start()
    try:
        context = browser.new_context()
        page = context.new_page()
        page.goto(app.login_url)  # the token becomes a cookie, then /
        llm.push(text("Remember: the code is 4711."))
        run_task(page, "remember a code")
        expect(page.locator(".msg.final")).to_contain_text("4711")
        sid = page.locator("#sessions li.current").get_attribute("data-id")
        assert app.stop() is not None
        app.start()  # same workspace: the session file is there
        page.goto(app.login_url)  # the token becomes a cookie, then /
        item = page.locator(f"#sessions li[data-id='{sid}']")
        expect(item).to_have_attribute("data-state", "finished")
        item.click()
        expect(page.locator(".msg.user").first).to_have_text("remember a code")
        expect(page.locator(".msg.final").first).to_contain_text("4711")
        llm.push(text("The code was 4711."))
        page.fill("#prompt", "what was the code?")
        page.click("#send")
        expect(page.locator(".msg.final")).to_have_count(2)
        expect(page.locator(".msg.final").last).to_contain_text("The code was 4711.")
        # The restored conversation went to the model.
        sent = str(llm.requests[-1].messages)
        assert "remember a code" in sent and "Remember: the code is 4711." in sent
        context.close()
    finally:
        app.stop()
        shutil.rmtree(tmp_path / "ws", ignore_errors=True)


def test_two_tasks_in_one_session_keep_their_replies_after_reload(page, llm) -> None:
    """Steps restart with every task; each reply stays with its own task, also after a
    reload, and shows its tokens and cost."""
    llm.push(text("Reply to the first task."))
    run_task(page, "first task")
    expect(page.locator(".msg.final")).to_have_count(1)
    llm.push(text("Reply to the second task."))
    page.fill("#prompt", "second task")
    page.click("#send")
    expect(page.locator(".msg.final")).to_have_count(2)

    def both_replies_are_there() -> None:
        replies = page.locator(".msg.assistant")
        expect(replies).to_have_count(2)
        expect(replies.nth(0).locator(".text")).to_have_text("Reply to the first task.")
        expect(replies.nth(1).locator(".text")).to_have_text("Reply to the second task.")
        for i in range(2):
            usage = replies.nth(i).locator(".usage")
            expect(usage).to_have_text(re.compile(r"^tokens \d+ in / \d+ out · \$\d[\d.e-]*$"))
        expect(page.locator(".msg.final .total").last).to_contain_text("task total: tokens")

    both_replies_are_there()
    reload(page)
    expect(page.locator(".msg.final")).to_have_count(2)
    both_replies_are_there()


#: What the agent runs to draw its chart: a real 120x60 PNG, no image library needed.
CHART_CODE = """import struct, zlib
w, h = 120, 60
row = b"\\0" + bytes(v for x in range(w) for v in (0, 255 * x // w, 200, 255))
rows = row * h
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
png = b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 6, 0, 0, 0))
png += chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")
open("chart.png", "wb").write(png)
print("chart saved:", len(png), "bytes")"""


SHOP = """<html><head><title>Widget shop</title></head><body style="font:20px sans-serif">
<h1>Widgets</h1><p>The blue widget costs 42 euros.</p>
<button onclick="document.title='Bought'">Buy now</button></body></html>"""


@WIDTHS
def test_the_computer_panel_follows_the_browser_terminal_and_files(
    page, llm, app, tmp_path
) -> None:
    """The agent's computer: the live browser (screenshot, address, the element it clicked;
    opened full size and zoomed from the keyboard), the terminal, and the image it wrote,
    shown inline."""
    steps = [
        lambda request, url: tool_calls(
            call("browser_use", {"action": "go_to_url", "url": url}),
            content="I will open the shop first.",
        ),
        lambda request, url: tool_calls(
            call("browser_use", {"action": "click_element", "index": _button(request)})
        ),
        lambda request, url: tool_calls(call("bash", {"command": "echo terminal-says-hi"})),
        lambda request, url: tool_calls(call("python_execute", {"code": CHART_CODE})),
        lambda request, url: text(
            "Done. The shop sells:\n\n- the **blue widget**, 42 euros\n- nothing else\n\n"
            "See `chart.png`."
        ),
    ]
    with WebServer() as shop:
        url = shop.html("/shop", SHOP)

        def respond(request: CapturedRequest) -> object:
            return steps.pop(0)(request, url)

        llm.responder = respond
        try:
            run_task(page, "check the widget price and chart it")
            # The panel is checked once the run is over: a loaded machine takes seconds a step.
            expect(page.locator("#status")).to_have_text("finished", timeout=120_000)
            browser = page.locator("#browser-panel")
            expect(browser).to_be_visible()
            expect(page.locator("#browser-url")).to_contain_text("/shop")
            expect(page.locator("#browser-action")).to_contain_text("click_element")
            expect(page.locator("#browser-action")).to_contain_text("Buy now")
            expect(page.locator("#screenshot")).to_be_visible()
            page.wait_for_function("() => document.querySelector('#screenshot').naturalWidth > 100")
            expect(page.locator("#terminal")).to_contain_text("$ echo terminal-says-hi")
            expect(page.locator("#terminal")).to_contain_text(">>> import struct, zlib")
            expect(page.locator("#terminal")).to_contain_text("chart saved")
            written = page.locator("#written .written[data-path='chart.png'] img")
            expect(written).to_be_visible()
            page.wait_for_function(
                "() => document.querySelector(\"#written .written[data-path='chart.png'] img\")"
                ".naturalWidth === 120"
            )
            expect(page.locator(".msg.final li")).to_have_count(2)
            expect(page.locator(".msg.final strong")).to_have_text("blue widget")
            expect(page.locator("#status")).to_have_text("finished")
            assert steps == []
        finally:
            llm.responder = None
    assert len(shop.hits("/shop")) >= 1
    assert_layout_fits(page)
    wide = page.viewport_size["width"] >= 1400
    update = wide and os.environ.get(UPDATE_SCREENSHOT) == "1"
    target = SCREENSHOT if update else tmp_path / "web-ui.png"
    page.screenshot(path=str(target))
    assert target.stat().st_size > 10_000
    the_browser_view_opens_full_size(page)


def the_browser_view_opens_full_size(page: object) -> None:
    """The thumbnail opens the screenshot at its real size; + and - zoom, 0 fits, Escape
    closes and gives the focus back; all from the keyboard (and the mouse)."""
    thumb = page.locator("#screenshot-open")  # type: ignore[attr-defined]
    shown = page.locator("#screenshot").evaluate("i => i.getBoundingClientRect().width")  # type: ignore[attr-defined]
    thumb.focus()
    page.keyboard.press("Enter")  # type: ignore[attr-defined]
    viewer, level = page.locator("#viewer"), page.locator("#zoom-level")  # type: ignore[attr-defined]
    expect(viewer).to_be_visible()
    width = "() => document.querySelector('#viewer-image').getBoundingClientRect().width"
    page.wait_for_function(f"(natural) => ({width})() === natural", arg=_natural(page))  # type: ignore[attr-defined]
    natural = _natural(page)
    assert natural > shown * 1.5, (natural, shown)  # the panel shrinks it; the viewer does not
    expect(level).to_have_text("100%")
    page.keyboard.press("+")  # type: ignore[attr-defined]
    expect(level).to_have_text("125%")
    page.wait_for_function(f"(w) => Math.abs(({width})() - w) <= 1", arg=natural * 1.25)  # type: ignore[attr-defined]
    page.keyboard.press("-")  # type: ignore[attr-defined]
    page.keyboard.press("-")  # type: ignore[attr-defined]
    expect(level).to_have_text("90%")
    page.keyboard.press("0")  # type: ignore[attr-defined]
    frame = page.locator("#viewer-frame").evaluate("f => f.clientWidth")  # type: ignore[attr-defined]
    page.wait_for_function(f"(w) => ({width})() <= w", arg=frame)  # type: ignore[attr-defined]
    page.keyboard.press("Escape")  # type: ignore[attr-defined]
    expect(viewer).to_be_hidden()
    expect(thumb).to_be_focused()
    thumb.click()
    expect(viewer).to_be_visible()
    page.click("#viewer-close")  # type: ignore[attr-defined]
    expect(viewer).to_be_hidden()
    expect(thumb).to_be_focused()


def _natural(page: object) -> int:
    return int(page.evaluate("document.querySelector('#screenshot').naturalWidth"))  # type: ignore[attr-defined]


def _button(request: CapturedRequest) -> int:
    """The index the browser state gave the shop's button (it changes between runs)."""
    prompt = str(request.messages[-1].get("content"))
    found = re.search(r"\[(\d+)\]<button", prompt)
    assert found, f"no button in the browser state: {prompt[-2000:]}"
    return int(found.group(1))


HOSTILE_ANSWER = """Here is the summary.

1. first point
2. second point

```python
print("<b>not bold</b>")
```

<img src=x onerror="window.__xss = 'answer img'">
<script>window.__xss = 'answer script'</script>
[a link](javascript:window.__xss='link') and [a safe one](https://example.org/docs)"""

HOSTILE_PAGE = """<html><body><h1 id="h">Report</h1>
<script>document.title = 'script ran'; document.body.dataset.ran = 'script';</script>
<img src=x onerror="document.body.dataset.ran = 'onerror'">
<p>the visible report</p></body></html>"""

HOSTILE_SVG = """<svg xmlns="http://www.w3.org/2000/svg" width="40" height="40"
onload="window.top.__xss = 'svg onload'"><script>window.top.__xss = 'svg script'</script>
<rect width="40" height="40" fill="#c33"/></svg>"""


def test_markdown_renders_and_hostile_html_does_not_run(page, llm) -> None:
    """A hostile model puts HTML in its answer, in an HTML file, in an SVG and in a file name:
    the answer renders as Markdown (lists, code), and none of the markup runs in Chromium."""
    evil_name = "<img src=x onerror=window.__xss=1>.txt"
    llm.push(
        tool_calls(
            call(
                "str_replace_editor",
                {"command": "create", "path": "report.html", "file_text": HOSTILE_PAGE},
            ),
            call(
                "str_replace_editor",
                {"command": "create", "path": "badge.svg", "file_text": HOSTILE_SVG},
            ),
            call("str_replace_editor", {"command": "create", "path": evil_name, "file_text": "x"}),
            content="<img src=x onerror=\"window.__xss = 'streamed'\"> writing **files**",
        ),
        text(HOSTILE_ANSWER),
    )
    run_task(page, "write a report")
    final = page.locator(".msg.final")
    expect(final.locator("ol li")).to_have_count(2)
    expect(final.locator("pre.code code")).to_have_text('print("<b>not bold</b>")')
    expect(final).to_contain_text("<script>window.__xss = 'answer script'</script>")
    expect(final).to_contain_text("<img src=x onerror=\"window.__xss = 'answer img'\">")
    expect(final.locator("a")).to_have_count(1)  # the javascript: link stays text
    expect(final.locator("a")).to_have_attribute("href", "https://example.org/docs")
    expect(page.locator(".msg.assistant strong")).to_have_text("files")
    # The written files: the HTML in a sandboxed frame, the SVG as an image, the name as text.
    frame_node = page.locator("#written .written[data-path='report.html'] iframe")
    expect(frame_node).to_have_attribute("sandbox", "")
    frame = frame_node.element_handle().content_frame()
    expect(frame.locator("p")).to_have_text("the visible report")
    assert frame.evaluate("document.body.dataset.ran") is None
    assert frame.evaluate("document.title") == ""
    svg = page.locator("#written .written[data-path='badge.svg'] img")
    expect(svg).to_be_visible()
    page.wait_for_function(
        "() => document.querySelector(\"#written .written[data-path='badge.svg'] img\")"
        ".naturalWidth > 0"
    )
    expect(page.locator(f"#files li.file[data-path='{evil_name}']")).to_have_text(evil_name)
    page.locator(f"#written .written[data-path='{evil_name}'] a.name").click()
    expect(page.locator("#preview strong")).to_have_text(evil_name)
    page.locator("#written .written[data-path='report.html'] a.name").click()
    preview = page.locator("#preview iframe")
    expect(preview).to_have_attribute("sandbox", "")
    expect(preview.element_handle().content_frame().locator("p")).to_have_text("the visible report")
    assert page.evaluate("window.__xss") is None
    assert page.locator("img[src='x']").count() == 0
    assert page.evaluate("document.body.dataset.ran") is None


# ---- issue 37: what a new user saw --------------------------------------------------------------

PANES = ("#sidebar", "#chat-pane", "#computer", "#files-pane")


def assert_layout_fits(page: object) -> None:
    """No pane is cut off: each lies within the window's width, usably wide, nothing scrolls
    sideways, and the workspace's Upload button can be reached."""
    report = page.evaluate(  # type: ignore[attr-defined]
        """(panes) => ({
            width: innerWidth,
            scroll: document.documentElement.scrollWidth,
            panes: panes.map((s) => {
                const r = document.querySelector(s).getBoundingClientRect();
                return [s, r.left, r.right, r.width];
            }),
        })""",
        list(PANES),
    )
    assert report["scroll"] <= report["width"], report
    for name, left, right, width in report["panes"]:
        assert left >= 0 and right <= report["width"] + 0.5 and width >= 150, (name, report)
    upload = page.locator("#files-pane label.button")  # type: ignore[attr-defined]
    upload.scroll_into_view_if_needed()
    expect(upload).to_be_in_viewport()


def expect_unobscured(locator: object) -> None:
    """The element is on screen and on top where it is drawn: nothing (the prompt box, the
    end of a scroll box) hides it."""
    locator.scroll_into_view_if_needed()  # type: ignore[attr-defined]
    hit = locator.evaluate(  # type: ignore[attr-defined]
        """(node) => {
            const r = node.getBoundingClientRect();
            const x = r.left + Math.min(r.width / 2, 20), y = r.top + r.height / 2;
            const top = document.elementFromPoint(x, y);
            return { onTop: !!top && (top === node || node.contains(top)), rect: [r.top, r.bottom],
                     hit: top ? top.outerHTML.slice(0, 80) : null };
        }"""
    )
    assert hit["onTop"], hit


LONG_ANSWER = (
    "The numbers are listed.\n\n"
    + "\n".join(f"- point {i}: something worth reading" for i in range(1, 41))
    + "\n\nThat is all."
)
CARD_GEOMETRY = """(card) => {
    const box = document.querySelector("#activity").getBoundingClientRect();
    const r = card.getBoundingClientRect();
    return r.top >= box.top - 0.5 && r.bottom <= box.bottom + 0.5 && r.top >= 0
        && r.bottom <= innerHeight && card.scrollHeight > card.clientHeight;
}"""
CARD_END = """(card) => {
    card.scrollTop = card.scrollHeight;
    const r = card.getBoundingClientRect();
    const text = card.querySelector(".result").firstChild;
    const range = document.createRange();
    range.setStart(text, text.length - 8);
    range.setEnd(text, text.length);
    const end = range.getBoundingClientRect();
    const summary = card.querySelector("summary").getBoundingClientRect();
    return { end: end.top >= r.top && end.bottom <= r.bottom + 0.5,
             summary: summary.top >= r.top - 0.5 && summary.bottom <= r.bottom,
             last: text.data.slice(-8) };
}"""


@WIDTHS
def test_the_answer_shows_once_with_its_total_in_view(page, llm) -> None:
    """The final answer is the run's last message, marked as the answer (not repeated in a
    card of its own); the task total under it is on screen, not under the prompt box; an
    expanded tool call is entirely in view and scrolls within itself; no pane is cut off,
    and a narrower window stacks the panes."""
    llm.push(
        tool_calls(
            call("bash", {"command": "for i in $(seq 1 150); do echo line-$i; done"}),
            content="Listing the numbers.",
        ),
        text(LONG_ANSWER),
    )
    run_task(page, "list the numbers")
    expect(page.locator("#status")).to_have_text("finished")
    final = page.locator(".msg.final")
    expect(final).to_have_count(1)
    expect(final).to_have_class(re.compile(r"\bassistant\b"))
    expect(final.locator("li")).to_have_count(40)
    expect(page.locator("#chat .text").filter(has_text="That is all.")).to_have_count(1)
    total = final.locator(".total")
    expect(total).to_contain_text("task total: tokens")
    expect_unobscured(total)
    assert_layout_fits(page)

    card = page.locator("#activity details.tool-call").first
    card.locator("summary").click()
    expect(card.locator(".result")).to_contain_text("line-150")
    page.wait_for_function(CARD_GEOMETRY, arg=card.element_handle())
    end = card.evaluate(CARD_END)
    assert end == {"end": True, "summary": True, "last": "line-150"}, end

    page.set_viewport_size({"width": 600, "height": 850})
    assert_layout_fits(page)
    tops = [page.locator(p).bounding_box()["y"] for p in PANES]
    assert tops == sorted(tops), tops  # stacked, one under the other
    expect_unobscured(total)


def _png(width: int, height: int) -> bytes:
    """A real RGBA PNG, no image library needed."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    row = b"\0" + bytes([40, 120, 200, 255] * width)
    head = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", head)
        + chunk(b"IDAT", zlib.compress(row * height))
        + chunk(b"IEND", b"")
    )


HOSTILE_MD = """# Report <img src=x onerror="window.__xss = 'heading'">

Some **bold** text &amp; entities: &lt;script&gt;window.__xss = 'entity'&lt;/script&gt; and
&#60;img src=x onerror=window.__xss=1&#62;

<img src=x onerror="window.__xss = 'raw img'">
<script>window.__xss = 'raw script'</script>

- [js](javascript:window.__xss='js')
- [js, spelled](JaVaScRiPt:window.__xss='js2')
- [js, entity](jav&#x61;script:window.__xss='js3')
- [data](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)
- [vbscript](vbscript:msgbox(1))
- [nested [inner](javascript:window.__xss='nested')](https://example.org/outer)
- [local](http://127.0.0.1:{port}/click?from=link)
- [also local](http://localhost:{port}/click?from=name)
- [safe](https://example.org/docs)
- ![tracker](http://127.0.0.1:{port}/track.png)
- ![](http://127.0.0.1:{port}/track2.png)
- <http://127.0.0.1:{port}/angle>
- ![the dot](../img/dot.png)

| a | b |
|---|---|
| <b>x</b> | `<i>code</i>` |
"""

EVIL_TOOL = "<img src=x onerror=window.__xss='tool'>"


@WIDTHS
def test_a_markdown_file_previews_rendered_and_safe(page, llm, app) -> None:
    """A Markdown file in the workspace is rendered like the model's messages: no raw HTML,
    links to http(s) only and never to this machine (a click would carry the login cookie),
    no remote image fetched (a listener on 127.0.0.1 hears nothing), the workspace's own
    images shown; a hostile file name and tool name stay text."""
    with WebServer() as listener:
        md = HOSTILE_MD.replace("{port}", str(listener.httpd.server_address[1]))
        name = "docs/<img src=x onerror=window.__xss=3>.md"
        llm.push(
            tool_calls(
                call("str_replace_editor", {"command": "create", "path": name, "file_text": md}),
                call(EVIL_TOOL, {}),
            ),
            text(
                f"Wrote it. ![t]({listener.url}/chat-track.png) [here]({listener.url}/chat), "
                "see https://example.org/page."
            ),
        )
        run_task(page, "write a report")
        expect(page.locator("#status")).to_have_text("finished")
        expect(page.locator("#activity summary").nth(1)).to_have_text(EVIL_TOOL)
        sid = page.locator("#sessions li.current").get_attribute("data-id")
        with app.client() as client:
            put = client.put(f"/api/sessions/{sid}/upload?path=img/dot.png", content=_png(12, 8))
            assert put.status_code == 201, put.text
        page.locator(f"#written .written[data-path='{name}'] a.name").click()
        view = page.locator("#preview .file-md")
        expect(page.locator("#preview strong").first).to_have_text(name)
        expect(view.locator("h3")).to_have_text(
            "Report <img src=x onerror=\"window.__xss = 'heading'\">"
        )
        expect(view.locator("strong")).to_have_text("bold")
        expect(view).to_contain_text("text & entities")
        expect(view).to_contain_text("<script>window.__xss = 'entity'</script>")
        expect(view).to_contain_text("<img src=x onerror=window.__xss=1>")
        expect(view).to_contain_text("<script>window.__xss = 'raw script'</script>")
        expect(view.locator("td").first).to_have_text("<b>x</b>")
        expect(view.locator("td code")).to_have_text("<i>code</i>")
        hrefs = view.locator("a").evaluate_all("links => links.map((a) => a.href)")
        assert sorted(hrefs) == ["https://example.org/docs", "https://example.org/outer"], hrefs
        for a in view.locator("a").all():
            assert set(a.get_attribute("rel").split()) >= {"noopener", "noreferrer"}
        image = view.locator("img")
        expect(image).to_have_count(1)  # only the workspace's own
        assert "path=img%2Fdot.png" in image.get_attribute("src")
        page.wait_for_function(
            "(i) => i.complete && i.naturalWidth === 12", arg=image.element_handle()
        )
        page.click("#preview .source-toggle")
        expect(page.locator("#preview pre.file-text")).to_contain_text("# Report <img src=x")
        expect(view).to_be_hidden()
        page.click("#preview .source-toggle")
        expect(view).to_be_visible()
        chat = page.locator(".msg.final")
        expect(chat).to_contain_text("image: t")
        expect(chat.locator("img")).to_have_count(0)
        expect(chat.locator("a")).to_have_count(1)  # not the two to this machine
        expect(chat.locator("a")).to_have_attribute("href", "https://example.org/page")
        assert_layout_fits(page)
        assert listener.requests == [], listener.requests
    assert page.evaluate("window.__xss") is None
    assert page.locator("img[src='x']").count() == 0
    assert page.locator("script").count() == 1  # the page's own module


@pytest.mark.parametrize("width", [1400, 900], ids=lambda w: f"{w}px")
def test_first_screen_a_failed_run_and_a_server_that_goes_away(browser, tmp_path, width) -> None:
    """The first screen says what to type, without an alarm; a failed run (nothing listens at
    the model's address) shows as failed everywhere, as the API says, however late the
    page's requests are answered; a server that stops is reported with how to start it; when
    it is back at the same address the page reconnects and shows the session as the server
    has it, once."""
    token = secrets.token_hex(12)
    web = WebApp(
        tmp_path,
        f"http://127.0.0.1:{free_port()}/v1",
        port=free_port(),
        env={"OPENMANUS_WEB_TOKEN": token},
    ).start()
    context = browser.new_context(viewport={"width": width, "height": 850})
    # Count the session listings the page asks for, until each is answered and applied.
    context.add_init_script(LISTING_COUNTER)
    try:
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(web.login_url)
        expect(page.locator("body")).to_have_attribute("data-ready", "true")
        welcome = page.locator("#welcome")
        expect(welcome).to_be_visible()
        expect(welcome).to_contain_text("Describe a task")
        expect(page.locator("#connection")).to_have_text("")
        expect(page.locator("#banner")).to_be_hidden()
        expect(page.locator("#sessions-empty")).to_be_visible()
        assert_layout_fits(page)
        welcome.locator("[data-prompt]").first.click()
        expect(page.locator("#prompt")).to_have_value(re.compile("prime numbers"))
        expect(page.locator("#prompt")).to_be_focused()

        page.fill("#prompt", "say hello")
        page.click("#send")
        expect(page.locator(".msg.error")).to_contain_text("did not complete")
        expect(page.locator("#status")).to_have_text("failed")
        page.wait_for_function("() => window.__listings === 0")
        item = page.locator("#sessions li.current")
        assert item.get_attribute("data-state") == "failed"
        assert item.locator(".meta").text_content() == "agent · failed"
        with web.client() as client:
            listed = client.get("/api/sessions").json()["sessions"]
        assert [(s["state"], s["running"]) for s in listed] == [("failed", False)]

        web.stop()
        banner = page.locator("#banner")
        expect(banner).to_contain_text("Cannot reach the OpenManus server", timeout=30_000)
        expect(banner).to_contain_text("python -m app.web")
        expect(page.locator("#connection")).to_have_text("offline")
        assert_layout_fits(page)

        web.start()
        expect(banner).to_be_hidden(timeout=30_000)
        expect(page.locator("#connection")).to_have_text("live", timeout=30_000)
        expect(page.locator(".msg.user")).to_have_count(1)
        expect(page.locator(".msg.user")).to_have_text("say hello")
        expect(page.locator(".msg.error")).to_have_count(1)
        expect(page.locator("#status")).to_have_text("failed")
        expect(item).to_have_attribute("data-state", "failed")
        assert not errors, errors
    finally:
        context.close()
        web.stop()


#: Wraps fetch: ``window.__listings`` is how many session listings are asked for and not yet
#: applied (it drops a task after the answer's text is read, when the page has used it).
LISTING_COUNTER = """
window.__listings = 0;
const realFetch = window.fetch;
window.fetch = async (...args) => {
  const listing = String(args[0]) === "/api/sessions" && !(args[1] && args[1].method);
  if (!listing) return realFetch(...args);
  window.__listings += 1;
  const done = () => setTimeout(() => { window.__listings -= 1; }, 0);
  try {
    const response = await realFetch(...args);
    const body = await response.text();
    done();
    return new Response(body, { status: response.status, headers: response.headers });
  } catch (error) { done(); throw error; }
};
"""


@WIDTHS
def test_a_page_that_lost_its_connection_catches_up_once(page, llm, app) -> None:
    """The network goes away while a task runs and ends: the page says it is offline, and
    once it is back it shows what happened meanwhile, from the API and the event log, each
    thing once."""
    llm.push(text("first answer"))
    run_task(page, "first task")
    expect(page.locator(".msg.final")).to_have_count(1)
    expect(page.locator("#connection")).to_have_text("live")
    sid = page.locator("#sessions li.current").get_attribute("data-id")
    page.context.set_offline(True)
    expect(page.locator("#connection")).to_have_text("offline")
    expect(page.locator("#banner")).to_contain_text("Cannot reach the OpenManus server")
    llm.push(tool_calls(call("bash", {"command": "echo meanwhile"})), text("second answer"))
    with app.client() as client:
        assert client.post(f"/api/sessions/{sid}/tasks", json={"prompt": "two"}).status_code == 202
        assert app.wait_idle(client, sid)["state"] == "finished"
    page.context.set_offline(False)
    expect(page.locator("#connection")).to_have_text("live", timeout=30_000)
    expect(page.locator("#banner")).to_be_hidden()
    expect(page.locator(".msg.final")).to_have_count(2)
    expect(page.locator(".msg.final").last).to_contain_text("second answer")
    expect(page.locator(".msg.user")).to_have_count(2)
    expect(page.locator("#activity details.tool-call")).to_have_count(1)
    expect(page.locator("#terminal")).to_contain_text("meanwhile")
    expect(page.locator("#status")).to_have_text("finished")
    expect(page.locator("#sessions li.current")).to_have_attribute("data-state", "finished")


def test_every_waited_predicate_is_a_function() -> None:
    """Playwright re-evaluates a predicate given as an expression with ``eval`` on each poll,
    which the page's CSP (no ``unsafe-eval``) refuses once the poll is no longer the first,
    synchronous one: such a wait passes on a quick machine and fails on a loaded one. A
    function is evaluated once. Every literal predicate in the browser tests is one."""
    import ast

    found = []
    for path in sorted(Path(__file__).parent.glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "wait_for_function"
                and node.args
            ):
                first = node.args[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    found.append((path.name, node.lineno, first.value))
    assert found  # the walk sees the calls
    expressions = [f for f in found if not re.match(r"\s*(\([^)]*\)\s*=>|function\b)", f[2])]
    assert not expressions, expressions
