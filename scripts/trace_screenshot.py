"""Refresh docs/tracing.png: a real Manus run (scripted model, real tools) traced into a real
Phoenix, shown by Phoenix's own UI in headless Chromium. A one-off for the docs, not a test.

    bash scripts/setup-phoenix.sh && .venv/bin/python scripts/trace_screenshot.py
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.testing import ScriptedLLMServer, call, tool_calls  # noqa: E402
from tests.phoenix import start_phoenix  # noqa: E402
from tests.test_main_e2e import child_env  # noqa: E402

OUT = ROOT / "docs" / "tracing.png"
PROJECT = "openmanus-demo"


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp, start_phoenix(Path(tmp) / "phx") as phoenix:
        work = Path(tmp)
        (work / "ws").mkdir()
        llm = ScriptedLLMServer()
        llm.start()
        llm.push(
            tool_calls(
                call("python_execute", {"code": "print(sum(range(10)))"}, id="call_sum"),
                call("str_replace_editor", {"command": "view", "path": "/etc/shadow"}, id="c2"),
                content="I will compute the sum and look at the file.",
                usage={"prompt_tokens": 1480, "completion_tokens": 62},
            ),
            tool_calls(
                call("terminate", {"status": "success"}, id="call_end"),
                content="The sum of 0..9 is 45; /etc/shadow is outside the workspace.",
                usage={"prompt_tokens": 1702, "completion_tokens": 31},
            ),
        )
        config = work / "config.toml"
        config.write_text(
            f'[llm]\nmodel = "gpt-4o-mini"\nbase_url = "{llm.base_url}"\n'
            'api_key = "sk-demo-0123456789abcdefghij"\nmax_retries = 0\n'
            f'[tracing]\nendpoint = "{phoenix.url}"\nservice_name = "{PROJECT}"\n'
            "record_content = true\n"
        )
        program = [sys.executable, "-I", str(ROOT / "main.py"), "-c", str(config)]
        subprocess.run(
            [*program, "-w", str(work / "ws"), "--trace", "-p", "Sum 0..9 and show /etc/shadow"],
            check=True,
            env=child_env(work),
            cwd="/",  # isolated, outside the workspace (work/ws)
            stdin=subprocess.DEVNULL,
        )
        llm.stop()
        deadline = time.monotonic() + 60
        while True:  # Phoenix stores what it receives in the background
            spans = phoenix.spans(PROJECT) if time.monotonic() < deadline else []
            failed = [s for s in spans if s["status_code"] == "ERROR"]
            if failed or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        span_id = failed[0]["context"]["span_id"]
        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path="/usr/bin/chromium", headless=True, args=["--no-sandbox"]
            )
            page = browser.new_page(viewport={"width": 1400, "height": 760})
            page.goto(f"{phoenix.url}/redirects/spans/{span_id}")
            page.get_by_text("execute_tool str_replace_editor").first.wait_for()
            page.get_by_text("Access denied").first.wait_for()  # the span's details
            page.wait_for_load_state("networkidle")
            page.screenshot(path=str(OUT), type="png")
            browser.close()
    print(f"{OUT}: {OUT.stat().st_size // 1024} KB")


if __name__ == "__main__":
    main()
