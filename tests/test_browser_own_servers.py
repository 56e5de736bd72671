"""The agent's browser may not open this program's own servers (security finding 4).

A hostile model, scripted, drives a real web UI (``python -m app.web --no-token``: the worst
case, where the token would not stop it) and asks its browser for the web UI's
``/api/sessions`` and another session's files under every spelling of the address, and via
pages it is allowed to open that redirect, frame or fetch there. Every attempt is refused
as a tool error and nothing of the other session reaches the model. Below the tool, the
request guard fails the page's own requests inside Chromium: a registered server never even
sees them (web security off, so CORS hides nothing).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from app import own_servers
from app.config import BrowserSettings
from app.exceptions import ToolError
from app.llm import LLM
from app.testing import ScriptedLLMServer, call, text, tool_calls
from app.tool.base import ToolFailure
from app.tool.browser_use_tool import BrowserUseTool
from app.tool.mcp import MCPClients
from tests.conftest import llm_settings
from tests.mcp_helpers import http_server, stop
from tests.test_browser_tool import page_eval, until_page
from tests.web_fixtures import WebServer, isolated_tempdir
from tests.web_ui_helpers import WebApp, sse_entries

pytest.importorskip("browser_use")  # the browser extra
httpx = pytest.importorskip("httpx")

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists("/usr/bin/chromium"), reason="needs chromium"),
]

SECRET = "SESSION-A-PRIVATE-NOTES-7731"
REFUSED = "own web UI"
TITLE = "VICTIM-TITLE-5512"
ATTACK = "list the other sessions of this web UI"


def spellings(port: int) -> list[str]:
    """The web UI's session list under every name and number a browser accepts for it."""
    hosts = [
        "127.0.0.1",
        "localhost",
        "127.1",
        "0x7f000001",
        "2130706433",
        "0177.0.0.1",
        "0x7f.0.0.1",
        "[::1]",
        "[::ffff:127.0.0.1]",
        "[::ffff:7f00:1]",
        "0.0.0.0",
        "0",
        "localhost.",
        "LOCALHOST",
        "LocalHost.",
        "sessions.localhost",  # Chromium resolves *.localhost to loopback itself
        "%31%32%37.0.0.1",
        "\uff11\uff12\uff17.\uff10.\uff10.\uff11",  # full-width digits
        "evil.example@127.0.0.1",
    ]
    hosts += loopback_names()
    return [
        *(f"http://{host}:{port}/api/sessions" for host in hosts),
        f"localhost:{port}/api/sessions",  # no scheme: taken as https://
        f"HTTP://127.0.0.1:{port}/api/sessions",
        f"http://127.0.0.1:0{port}/api/sessions",
        f"http:127.0.0.1:{port}/api/sessions",
        f"http:///127.0.0.1:{port}/api/sessions",
        f"http://127.0.0.1:{port}\\@evil.example/api/sessions",
        f"view-source:http://127.0.0.1:{port}/api/sessions",
    ]


def loopback_names() -> list[str]:
    """Names /etc/hosts maps to loopback (besides localhost): resolved, they reach us."""
    names = []
    try:
        lines = Path("/etc/hosts").read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        fields = line.split("#", 1)[0].split()
        if len(fields) >= 2 and fields[0].startswith("127."):
            names += [n for n in fields[1:] if "localhost" not in n]
    return names[:2]


def test_a_hostile_model_cannot_read_other_sessions_through_the_browser(
    tmp_path: Path, llm: ScriptedLLMServer
) -> None:
    with WebServer() as lure:
        app = WebApp(
            tmp_path, llm.base_url, extra_config="[browser]\nheadless = true", args=("--no-token",)
        ).start()
        try:
            _attack(app, lure, llm)
        finally:
            app.stop()


def _attack(app: WebApp, lure: WebServer, llm: ScriptedLLMServer) -> None:
    port = app.port
    target = f"http://127.0.0.1:{port}/api/sessions"
    with app.client() as client:
        llm.push(text("noted"))
        victim = app.new_session(client, f"my private plan: {TITLE}")
        app.wait_idle(client, victim)
        (app.workspace / "web" / victim / "notes.txt").write_text(SECRET)
        # Without the guard this is what the browser would get (--no-token: nothing else stops it).
        assert TITLE in client.get("/api/sessions").text
        file_url = f"http://127.0.0.1:{port}/api/sessions/{victim}/file?path=notes.txt"
        assert client.get(file_url).text == SECRET

        lure.redirects["/hop"] = target
        lure.redirects["/hop-file"] = file_url
        lure.html("/landing", "<html><head><title>Landing</title></head><body>ok</body></html>")
        lure.html(
            "/scripted",
            f"<html><head><title>Scripted</title></head><body><p id=out>waiting</p>"
            f'<iframe src="{file_url}"></iframe><script>'
            f'fetch("{target}").then(r => r.text()).then(t => out.textContent = t)'
            f'.catch(e => out.textContent = "fetch failed");'
            f'setTimeout(() => location.href = "http://0x7f000001:{port}/api/sessions", 300);'
            "</script></body></html>",
        )
        everything = [*spellings(port), file_url.replace("127.0.0.1", "127.1")]
        attempts = [
            call("browser_use", {"action": action, "url": url})
            for action in ("go_to_url", "open_tab")
            for url in everything
        ]
        llm.push(
            *(tool_calls(*attempts[i : i + 8]) for i in range(0, len(attempts), 8)),
            tool_calls(call("browser_use", {"action": "go_to_url", "url": lure.url + "/landing"})),
            tool_calls(call("browser_use", {"action": "go_to_url", "url": lure.url + "/hop"})),
            tool_calls(call("browser_use", {"action": "go_to_url", "url": lure.url + "/hop-file"})),
            tool_calls(call("browser_use", {"action": "go_to_url", "url": lure.url + "/scripted"})),
            tool_calls(call("browser_use", {"action": "wait", "seconds": 2})),
            text("I could not get in."),
        )
        attacker = app.new_session(client, ATTACK)
        item = app.wait_idle(client, attacker, timeout=240)
        assert item["state"] == "finished", item
        with client.stream("GET", f"/api/sessions/{attacker}/events") as stream:
            log = [entry for _, entry in sse_entries(stream)]

    results = [e for e in log if e.get("kind") == "tool_result"]
    assert len(results) == 2 * len(everything) + 5, [r.get("output", "")[:100] for r in results]
    refusals = results[: 2 * len(everything)]
    for result, url in zip(refusals, everything + everything, strict=True):
        output = str(result.get("output", ""))
        # Refused as our own server, or (``http:host``, no slashes) as no web address at all.
        assert result["error"], (url, output)
        assert (REFUSED in output and "may not open" in output) or (
            "only opens web pages" in output and url.startswith(("http:1", "http:///"))
        ), (url, output)
    redirected = " ".join(str(r.get("output", "")) for r in results[2 * len(everything) :])
    assert redirected.count(REFUSED) >= 2, redirected  # both redirects were failed and reported
    sent = json.dumps([r.body for r in llm.requests if ATTACK in json.dumps(r.body)])
    assert sent.count(REFUSED) >= len(everything)  # the model read the refusals
    for leak in (TITLE, SECRET, '"sessions":'):
        assert leak not in sent, "the other session reached the model"
        assert leak not in json.dumps(log)


@pytest.mark.asyncio
async def test_the_request_guard_fails_every_request_to_a_registered_server(
    llm: ScriptedLLMServer,
) -> None:
    """In-process: a server registered as ours receives nothing from the browser, whether the
    model, a redirect, a frame, a fetch or a script asks (web security off: no CORS)."""
    with WebServer() as ours, WebServer() as lure, isolated_tempdir():
        ours.html("/api/sessions", f"<html><body>{SECRET}</body></html>")
        port = ours.httpd.server_address[1]
        inside = f"http://127.0.0.1:{port}/api/sessions"
        lure.redirects["/hop"] = inside
        lure.html(
            "/scripted",
            "<html><head><title>Scripted</title></head><body><p id=out>waiting</p>"
            f'<iframe src="http://localhost:{port}/api/sessions"></iframe><script>'
            f'fetch("http://127.1:{port}/api/sessions").then(r => r.text())'
            '.then(t => out.textContent = t).catch(e => out.textContent = "fetch failed");'
            "</script></body></html>",
        )
        tool = BrowserUseTool(
            settings=BrowserSettings(headless=True, action_timeout=20, disable_security=True),
            llm=LLM.create(llm_config=llm_settings(llm)),
        )
        lure.html("/landing", "<html><head><title>Landing</title></head><body>ok</body></html>")
        handle = None
        try:
            # The browser starts before the server registers: its patterns follow the registry.
            await tool.execute(action="go_to_url", url=lure.url + "/landing")
            handle = own_servers.register("web UI", "127.0.0.1", port)
            with pytest.raises(ToolError, match=REFUSED):
                await tool.execute(action="go_to_url", url=f"http://2130706433:{port}/x")
            seen = [await _attempt(tool, lure.url + "/hop")]
            seen.append(await _attempt(tool, lure.url + "/scripted"))
            out = await until_page(tool, "out.textContent !== 'waiting' && out.textContent")
            frame = await page_eval(
                tool, "document.querySelector('iframe').contentDocument?.body?.innerText || ''"
            )
            state = await tool.get_current_state()
            seen += [str(out), str(frame), state.output or ""]
            joined = "\n".join(seen)
            assert out == "fetch failed" and SECRET not in joined, joined
            assert REFUSED in joined, joined  # the model is told what the page tried
            assert ours.requests == [], "a request reached the registered server"
        finally:
            if handle is not None:
                own_servers.unregister(handle)
            await tool.cleanup()


async def _attempt(tool: BrowserUseTool, url: str) -> str:
    """What the model reads after go_to_url: the result, or the tool error."""
    try:
        return (await tool.execute(action="go_to_url", url=url)).output or ""
    except ToolError as e:
        return e.message


@pytest.mark.asyncio
async def test_the_mcp_servers_browser_refuses_the_mcp_server(tmp_path: Path) -> None:
    """``python -m app.mcp.server`` over HTTP registers its address: its own ``browser_use``
    (called by a client) may not open its endpoint, in any spelling."""
    with WebServer() as web, isolated_tempdir():
        web.html("/page", "<html><head><title>Fine</title></head><body>hi</body></html>")
        args = ["-m", "app.mcp.server", "--transport", "http", "--port", "0"]
        with http_server([*args, "--workspace", str(tmp_path / "ws")], tmp_path) as (proc, url):
            port = int(url.rsplit(":", 1)[1].split("/", 1)[0])
            clients = MCPClients(connect_timeout=30)
            try:
                await clients.connect_http(url)
                name = "mcp_openmanus_browser_use"
                fine = await clients.execute(
                    name=name, tool_input={"action": "go_to_url", "url": web.url + "/page"}
                )
                assert not isinstance(fine, ToolFailure), fine
                for host in ("127.0.0.1", "127.1", "0x7f000001", "[::ffff:127.0.0.1]", "localhost"):
                    result = await clients.execute(
                        name=name,
                        tool_input={"action": "go_to_url", "url": f"http://{host}:{port}/mcp"},
                    )
                    assert isinstance(result, ToolFailure), (host, result)
                    assert "own MCP server" in str(result.error), result.error
            finally:
                await clients.disconnect()
            assert stop(proc) == 0
