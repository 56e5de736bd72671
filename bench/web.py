"""``python -m bench --web``: the web UI's figures (printed, not asserted).

* event latency from the server appending an event to the page's ``onmessage`` (Chromium
  through Playwright; both clocks are this machine's), target p95 < 50 ms;
* 50 sessions streaming at once (an SSE reader each): latency and wall time;
* page weight (bytes, gzipped) and time to first contentful paint.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["render_web", "run_web"]

LATENCY_TARGET_MS = 50.0
CHROMIUM = "/usr/bin/chromium"


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _page_weight() -> dict[str, int]:
    from app.web.server import STATIC_DIR

    raw = sum(p.stat().st_size for p in STATIC_DIR.iterdir() if p.is_file())
    zipped = sum(len(gzip.compress(p.read_bytes())) for p in STATIC_DIR.iterdir() if p.is_file())
    return {"bytes": raw, "gzip_bytes": zipped}


def _browser_figures(login_url: str, sessions: int) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=[
                "--no-sandbox",
                "--disable-background-networking",
                "--no-first-run",
                "--disable-sync",
            ],
        )
        page = browser.new_page()
        page.add_init_script(
            "window.__lat = []; window.addEventListener('openmanus:event', e => {"
            " if (!e.detail.history) window.__lat.push(Date.now() - e.detail.t * 1000); });"
        )
        page.goto(login_url)  # the token becomes a cookie, then the page loads
        page.wait_for_selector("body[data-ready=true]")
        paint = page.evaluate(
            "performance.getEntriesByType('paint').map(p => [p.name, p.startTime])"
        )
        latencies: list[float] = []
        for i in range(sessions):
            page.click("#new-session")
            page.wait_for_selector("#sessions li.current")
            page.fill("#prompt", f"task {i}")
            page.click("#send")
            page.wait_for_selector(".msg.final")
            latencies += page.evaluate("window.__lat.splice(0)")
        browser.close()
    return {"paint": dict(paint), "latencies_ms": latencies}


async def _concurrent(base: str, n: int, token: str | None) -> dict[str, Any]:
    import httpx

    latencies: list[float] = []
    headers = {"authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(base_url=base, timeout=120, headers=headers) as client:
        ids = []
        for _i in range(n):
            r = await client.post("/api/sessions", json={"mode": "agent"})
            ids.append(r.json()["id"])

        async def follow(sid: str) -> int:
            count = 0
            async with client.stream("GET", f"/api/sessions/{sid}/events") as stream:
                async for line in stream.aiter_lines():
                    if not line.startswith("data: "):
                        continue
                    entry = json.loads(line[6:])
                    latencies.append(time.time() * 1000 - entry["t"] * 1000)
                    count += 1
                    if entry["kind"] == "task_finished":
                        return count
            return count

        readers = [asyncio.create_task(follow(sid)) for sid in ids]
        start = time.perf_counter()
        await asyncio.gather(
            *(client.post(f"/api/sessions/{sid}/tasks", json={"prompt": "go"}) for sid in ids)
        )
        counts = await asyncio.gather(*readers)
        wall = time.perf_counter() - start
    return {"sessions": n, "events": sum(counts), "wall_s": wall, "latencies_ms": latencies}


def run_web(sessions: int = 50, page_tasks: int = 5) -> dict[str, Any]:
    from app.testing import ScriptedLLMServer, text
    from tests.web_ui_helpers import WebApp

    answer = " ".join(f"word{i}" for i in range(60))
    with ScriptedLLMServer(responder=lambda req: text(answer)) as llm:
        with tempfile.TemporaryDirectory() as tmp:
            app = WebApp(Path(tmp), llm.base_url).start()
            try:
                figures = {"weight": _page_weight()}
                figures["browser"] = _browser_figures(app.login_url, page_tasks)
                figures["concurrent"] = asyncio.run(_concurrent(app.base, sessions, app.token))
            finally:
                app.stop()
    return figures


def render_web(figures: dict[str, Any]) -> str:
    weight, browser, conc = figures["weight"], figures["browser"], figures["concurrent"]
    lat = browser["latencies_ms"]
    p95 = _pct(lat, 0.95)
    mark = "met" if p95 < LATENCY_TARGET_MS else "NOT met"
    clat = conc["latencies_ms"]
    fcp = browser["paint"].get("first-contentful-paint", float("nan"))
    return "\n".join(
        [
            "Web UI",
            f"  page weight: {weight['bytes']} bytes ({weight['gzip_bytes']} gzipped), "
            f"first contentful paint {fcp:.0f} ms",
            f"  event latency emit -> page: p50 {statistics.median(lat) if lat else 0:.1f} ms, "
            f"p95 {p95:.1f} ms over {len(lat)} events (target p95 < {LATENCY_TARGET_MS:g} ms "
            f"-> {mark})",
            f"  {conc['sessions']} sessions streaming at once: {conc['events']} events in "
            f"{conc['wall_s']:.2f} s, latency p50 {_pct(clat, 0.5):.1f} ms, "
            f"p95 {_pct(clat, 0.95):.1f} ms",
        ]
    )
