"""The web UI in a real Chromium (Playwright) against the real server and the scripted LLM.

Every wait is on page state (Playwright's auto-waiting ``expect``) or on /proc, never a sleep.
The first test refreshes ``docs/web-ui.png``, the screenshot the README shows.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.testing import ScriptedLLMServer, call, slow, text, tool_calls
from tests.proc_utils import processes_in
from tests.test_run_flow_e2e import plan_call
from tests.web_ui_helpers import WebApp, children_of, wait_until

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

CHROMIUM = "/usr/bin/chromium"
ROOT = Path(__file__).resolve().parent.parent
SCREENSHOT = ROOT / "docs" / "web-ui.png"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Debian's chromium package"),
]


@pytest.fixture(scope="module")
def llm() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer() as server:
        yield server


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory, llm: ScriptedLLMServer) -> Iterator[WebApp]:
    web = WebApp(tmp_path_factory.mktemp("webui"), llm.base_url).start()
    yield web
    web.stop()


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
def page(browser: object, app: WebApp, llm: ScriptedLLMServer) -> Iterator[object]:
    assert llm.remaining == 0, "a previous test left replies unused"
    context = browser.new_context(
        viewport={"width": 1500, "height": 900},  # type: ignore[attr-defined]
        accept_downloads=True,
    )
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(app.base + "/")
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    yield page
    context.close()
    assert not errors, errors


def run_task(page: object, prompt: str, mode: str = "agent") -> None:
    page.select_option("#mode", mode)  # type: ignore[attr-defined]
    page.click("#new-session")  # type: ignore[attr-defined]
    expect(page.locator("#sessions li.current")).to_have_count(1)  # type: ignore[attr-defined]
    page.fill("#prompt", prompt)  # type: ignore[attr-defined]
    page.click("#send")  # type: ignore[attr-defined]


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
    SCREENSHOT.parent.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOT))
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


def test_stop_cancels_a_long_task_and_leaves_no_process(page, llm, app) -> None:
    llm.push(tool_calls(call("bash", {"command": "sleep 300 & sleep 301"})))
    run_task(page, "wait a long time")
    expect(page.locator("#activity details.tool-call.pending")).to_have_count(1)
    sid = page.locator("#sessions li.current").get_attribute("data-id")
    workspace = app.workspace / "web" / sid
    wait_until(lambda: processes_in(workspace), what="the sleep to start")
    page.click("#stop")
    expect(page.locator("#status")).to_have_text("stopped")
    expect(page.locator(".msg.error")).to_contain_text("stopped by the user")
    assert processes_in(workspace) == []
    assert children_of(app.pid) == []
    # The session is still usable.
    llm.push(text("Still here."))
    page.fill("#prompt", "are you there?")
    page.click("#send")
    expect(page.locator(".msg.final")).to_contain_text("Still here.")


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
        page.goto(app.base + "/")
        llm.push(text("Remember: the code is 4711."))
        run_task(page, "remember a code")
        expect(page.locator(".msg.final")).to_contain_text("4711")
        sid = page.locator("#sessions li.current").get_attribute("data-id")
        assert app.stop() is not None
        app.start()  # same workspace: the session file is there
        page.goto(app.base + "/")
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
