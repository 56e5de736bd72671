"""The web UI's HTTP API against hostile input: unknown ids, path escapes, wrong Host/Origin,
missing tokens, oversized uploads, dropped streams (AG-UI: tests/test_agui.py)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.testing import ScriptedLLMServer, call, error, slow, text, tool_calls
from tests.conftest import TEST_API_KEY
from tests.web_ui_helpers import WebApp, commands_in, sse_entries, wait_until

httpx = pytest.importorskip("httpx")  # the browser and search extras install it

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory, llm: ScriptedLLMServer) -> Iterator[WebApp]:
    web = WebApp(
        tmp_path_factory.mktemp("webapi"), llm.base_url, extra_config="[web]\nmax_upload_mb = 0.01"
    ).start()
    yield web
    web.stop()


@pytest.fixture
def client(app: WebApp, llm: ScriptedLLMServer) -> Iterator[httpx.Client]:
    assert llm.remaining == 0, "a previous test left replies unused"
    with app.client() as c:
        yield c


@pytest.fixture
def session(app: WebApp, client: httpx.Client) -> str:
    return app.new_session(client)


def assert_error(response: httpx.Response, status: int, words: str = "") -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert isinstance(body["error"], str) and body["error"]
    assert words.lower() in body["error"].lower()


# ---- unknown sessions and bad bodies -------------------------------------------------------------


@pytest.mark.parametrize("sid", ["nope", "20200101-000000-abcdef", "..", "a%2F..%2F..", "%00"])
def test_unknown_session_ids_are_404(client: httpx.Client, sid: str) -> None:
    for method, path in [
        ("GET", "events"),
        ("POST", "stop"),
        ("GET", "files"),
        ("POST", "tasks"),
        ("POST", "open"),
        ("GET", "screenshot"),
    ]:
        response = client.request(
            method,
            f"/api/sessions/{sid}/{path}",
            json={"prompt": "x"} if method == "POST" else None,
        )
        assert response.status_code in (404,), (method, path, response.text)
        assert response.json()["error"]


def test_bad_bodies_are_clear_400s(client: httpx.Client, session: str) -> None:
    assert_error(client.post("/api/sessions", json={"mode": "robot"}), 400, "mode")
    assert_error(
        client.post(
            "/api/sessions", content=b"{not json", headers={"content-type": "application/json"}
        ),
        400,
        "json",
    )
    assert_error(client.post("/api/sessions", json=[1, 2]), 400, "object")
    assert_error(
        client.post(f"/api/sessions/{session}/tasks", json={"prompt": "  "}), 400, "prompt"
    )
    assert_error(
        client.post(f"/api/sessions/{session}/answer", json={"question_id": "nope", "answer": "x"}),
        404,
        "question",
    )
    assert_error(client.post(f"/api/sessions/{session}/continue", json={}), 409, "cut short")
    assert_error(client.get("/api/nothing-here"), 404)
    assert client.post(f"/api/sessions/{session}/stop", json={}).json()["stopped"] is False


def test_a_second_task_while_one_runs_is_409(client, app, llm) -> None:
    llm.push(slow(1.0, text("first")), text("second"))
    sid = app.new_session(client, "first task")
    assert_error(
        client.post(f"/api/sessions/{sid}/tasks", json={"prompt": "more"}), 409, "already running"
    )
    app.wait_idle(client, sid)
    assert client.post(f"/api/sessions/{sid}/tasks", json={"prompt": "more"}).status_code == 202
    app.wait_idle(client, sid)


# ---- the file API --------------------------------------------------------------------------------


def test_path_escapes_are_refused(
    client: httpx.Client, app: WebApp, session: str, tmp_path: Path
) -> None:
    ws = app.workspace / "web" / session
    (ws / "inside.txt").write_text("ok")
    outside = tmp_path / "outside.txt"
    outside.write_text("TOP SECRET")
    os.symlink(outside, ws / "planted-file")
    os.symlink(tmp_path, ws / "planted-dir")
    base = f"/api/sessions/{session}"
    assert client.get(f"{base}/file", params={"path": "inside.txt"}).text == "ok"
    for path, status in [
        ("../outside.txt", 403),
        ("../../../../etc/passwd", 403),
        ("sub/../../x", 403),
        ("/etc/passwd", 400),
        (str(outside), 400),
        ("planted-file", 403),
        ("planted-dir/outside.txt", 403),
        ("inside.txt\x00.png", 400),
        ("", 400),
        ("nothing.txt", 404),
    ]:
        response = client.get(f"{base}/file", params={"path": path})
        assert_error(response, status)
        assert "TOP SECRET" not in response.text
    for raw in ["path=%2e%2e%2foutside.txt", "path=%2E%2E/outside.txt", "path=inside.txt%00"]:
        response = client.get(f"{base}/file?{raw}")
        assert response.status_code in (400, 403), response.text
        assert "TOP SECRET" not in response.text
    # Double encoding is a literal name, not a way out.
    assert_error(client.get(f"{base}/file?path=%252e%252e%252foutside.txt"), 404)
    assert_error(client.get(f"{base}/files", params={"path": "planted-dir"}), 403)
    assert_error(client.get(f"{base}/files", params={"path": "../"}), 403)
    listing = client.get(f"{base}/files").json()["entries"]
    kinds = {e["name"]: e["kind"] for e in listing}
    assert kinds == {"inside.txt": "file", "planted-file": "link", "planted-dir": "link"}
    for path in ["../evil.txt", "/tmp/evil.txt", "planted-dir/evil.txt", "planted-file"]:
        response = client.put(f"{base}/upload", params={"path": path}, content=b"x")
        assert response.status_code in (400, 403), (path, response.text)
    assert not (tmp_path / "evil.txt").exists() and outside.read_text() == "TOP SECRET"


def test_previews_are_sandboxed(client: httpx.Client, app: WebApp, session: str) -> None:
    ws = app.workspace / "web" / session
    (ws / "page.html").write_text("<script>fetch('/api/sessions')</script>")
    response = client.get(f"/api/sessions/{session}/file", params={"path": "page.html"})
    assert response.headers["content-security-policy"].startswith("sandbox")
    assert response.headers["x-content-type-options"] == "nosniff"
    download = client.get(
        f"/api/sessions/{session}/file", params={"path": "page.html", "download": "1"}
    )
    assert download.headers["content-disposition"].startswith("attachment")
    assert download.headers["content-type"] == "application/octet-stream"


def test_recent_files_are_the_workspace_changes_and_follow_no_link(
    client: httpx.Client, app: WebApp, session: str, tmp_path: Path
) -> None:
    """``/recent`` (the computer panel's "files written"): files changed since a time, newest
    first, from the whole tree; never through a planted link, never the session files."""
    ws = app.workspace / "web" / session
    (ws / "old.txt").write_text("old")
    os.utime(ws / "old.txt", (1_000_000, 1_000_000))
    (ws / "charts").mkdir()
    (ws / "charts" / "a.png").write_bytes(b"png")
    os.utime(ws / "charts" / "a.png", (2_000_000_000, 2_000_000_000))
    (ws / "<img src=x onerror=alert(1)>.html").write_text("<script>1</script>")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "secret.txt").write_text("TOP SECRET")
    os.symlink(outside, ws / "planted-dir")
    os.symlink(outside / "secret.txt", ws / "planted-file")
    base = f"/api/sessions/{session}/recent"
    files = client.get(base).json()["files"]  # since the session began
    paths = [f["path"] for f in files]
    assert paths[0] == "charts/a.png"  # the newest first
    assert set(paths) == {"charts/a.png", "<img src=x onerror=alert(1)>.html"}
    everything = [f["path"] for f in client.get(base, params={"since": "0"}).json()["files"]]
    assert "old.txt" in everything and not any("secret" in p for p in everything)
    assert not any(p.startswith(("planted", ".sessions")) for p in everything)
    assert client.get(base, params={"since": "3000000000"}).json()["files"] == []
    for bad in ["soon", "nan", ""]:
        assert_error(client.get(base, params={"since": bad}), 400, "since")


def test_the_favicon_is_served(client: httpx.Client) -> None:
    for path in ["/favicon.ico", "/static/favicon.svg"]:
        response = client.get(path)
        assert response.status_code == 200, path
        assert response.headers["content-type"].startswith("image/svg+xml")
        assert response.text.startswith("<svg")
    page = client.get("/").text
    assert '<link rel="icon" type="image/svg+xml" href="/static/favicon.svg">' in page


def test_uploads_are_size_limited_and_leave_nothing(client, app, session) -> None:
    ws = app.workspace / "web" / session
    base = f"/api/sessions/{session}/upload"
    ok = client.put(base, params={"path": "data/in.csv"}, content=b"a,b\n1,2\n")
    assert ok.status_code == 201 and (ws / "data" / "in.csv").read_bytes() == b"a,b\n1,2\n"
    limit = int(0.01 * 1024 * 1024)
    assert_error(
        client.put(base, params={"path": "big.bin"}, content=b"x" * (limit + 1)), 413, "limited"
    )

    def chunks() -> Iterator[bytes]:  # no Content-Length: the stream itself is cut off
        for _ in range(limit // 1000 + 5):
            yield b"y" * 1000

    assert_error(client.put(base, params={"path": "streamed.bin"}, content=chunks()), 413)
    assert sorted(p.name for p in ws.rglob("*")) == ["data", "in.csv"]


# ---- Host, Origin and tokens ---------------------------------------------------------------------


def test_wrong_host_and_origin_are_refused(client: httpx.Client, app: WebApp, session: str) -> None:
    port = app.port
    assert_error(
        client.get("/api/sessions", headers={"host": f"evil.example:{port}"}), 421, "rebinding"
    )
    assert_error(client.get("/api/sessions", headers={"host": "127.0.0.1:1"}), 421)
    assert client.get("/api/sessions", headers={"host": f"localhost:{port}"}).status_code == 200
    evil = {"origin": "http://evil.example"}
    assert_error(client.post("/api/sessions", json={"mode": "agent"}, headers=evil), 403)
    assert_error(client.get(f"/api/sessions/{session}/events", headers=evil), 403)
    assert_error(client.post("/api/sessions", json={}, headers={"origin": "null"}), 403)
    same = {"origin": app.base}
    assert client.post("/api/sessions", json={"mode": "agent"}, headers=same).status_code == 201


#: Every route, with a body where it takes one: each must refuse a request without the token.
ROUTES = [
    ("GET", "/", None),
    ("GET", "/static/app.js", None),
    ("GET", "/api/info", None),
    ("GET", "/api/sessions", None),
    ("POST", "/api/sessions", {"mode": "agent"}),
    ("POST", "/api/sessions/{sid}/open", {}),
    ("POST", "/api/sessions/{sid}/tasks", {"prompt": "x"}),
    ("POST", "/api/sessions/{sid}/continue", {}),
    ("POST", "/api/sessions/{sid}/stop", {}),
    ("POST", "/api/sessions/{sid}/answer", {"question_id": "q", "answer": "a"}),
    ("GET", "/api/sessions/{sid}/events", None),
    ("GET", "/api/sessions/{sid}/files", None),
    ("GET", "/api/sessions/{sid}/file?path=secret.txt", None),
    ("PUT", "/api/sessions/{sid}/upload?path=x.txt", None),
    ("GET", "/api/sessions/{sid}/screenshot", None),
    ("POST", "/api/agui", {"threadId": "t", "runId": "r", "messages": []}),
]


def test_loopback_needs_the_token_on_every_route(app: WebApp, session: str) -> None:
    """Loopback is not a boundary: other users, programs and the agent's own browser reach it."""
    (app.workspace / "web" / session / "secret.txt").write_text("SESSION SECRET")
    token = app.token
    assert token and len(token) >= 32 and app.url == f"{app.base}/?token={token}"
    with app.client(login=False) as c:
        for method, path, body in ROUTES:
            url = path.format(sid=session)
            response = c.request(method, url, json=body)
            assert_error(response, 401, "token")
            assert "SESSION SECRET" not in response.text and session not in response.text
        assert_error(c.get("/api/sessions", headers={"authorization": "Bearer wrong"}), 401)
        assert_error(c.get("/api/sessions", headers={"authorization": f"Basic {token}"}), 401)
        assert_error(c.get("/?token=wrong"), 401, "wrong")
        # A browser without the cookie gets a page that says how to log in.
        page = c.get("/", headers={"accept": "text/html"})
        assert page.status_code == 401 and "text/html" in page.headers["content-type"]
        assert "?token=" in page.text and "Bearer" in page.text
        # The login address: the token becomes a cookie and leaves the address bar.
        first = c.get("/", params={"token": token})
        assert first.status_code == 303 and first.headers["location"] == "/"
        cookie = first.headers["set-cookie"]
        assert cookie.startswith(f"openmanus_token_{app.port}={token};")
        for flag in ("HttpOnly", "SameSite=Strict", "Path=/"):
            assert flag in cookie, cookie
        assert first.headers["referrer-policy"] == "no-referrer"
    jar = {f"openmanus_token_{app.port}": token}
    with app.client(login=False, cookies=jar) as c:
        assert c.get("/").status_code == 200
        listing = c.get("/api/sessions").json()["sessions"]
        assert session in {item["id"] for item in listing}
        got = c.get(f"/api/sessions/{session}/file", params={"path": "secret.txt"})
        assert got.text == "SESSION SECRET"
        with c.stream("GET", f"/api/sessions/{session}/events") as stream:
            assert stream.status_code == 200
    # The cookie of another port (another web UI on this host) does not open this one.
    with app.client(login=False, cookies={f"openmanus_token_{app.port + 1}": token}) as c:
        assert_error(c.get("/api/sessions"), 401)
    with app.client() as c:  # Bearer, as API and AG-UI clients send it
        assert c.get("/api/sessions").status_code == 200


def test_deeply_nested_or_broken_json_is_a_400(app: WebApp, client: httpx.Client) -> None:
    """No parser limit or bad text reaches the error handler as a 500 with a traceback."""
    json_type = {"content-type": "application/json"}
    bodies = [
        b"[" * 100_000,
        b'{"mode": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        b'{"prompt": ' + b'{"a": ' * 5_000 + b"1" + b"}" * 5_000 + b"}",
        rb'{"mode": "agent", "prompt": "\ud800"}',  # a lone surrogate, escaped
        rb'{"\udfff": 1}',
        b'{"mode": "agent", "prompt": "caf\xe9"}',  # Latin-1, not UTF-8
        b"\xff\xfe{}",
        b'{"prompt": "x"}\x00',
    ]
    session = app.new_session(client)
    for body in bodies:
        for path in ("/api/sessions", f"/api/sessions/{session}/tasks", "/api/agui"):
            response = client.post(path, content=body, headers=json_type)
            assert_error(response, 400)
            assert "Traceback" not in response.text and len(response.text) < 400
    assert_error(
        client.post("/api/sessions", content=b"[" * 100_000, headers=json_type), 400, "nested"
    )
    assert_error(
        client.post("/api/sessions", content=rb'{"prompt": "\ud800"}', headers=json_type),
        400,
        "surrogate",
    )
    # Bad bytes in the address (not JSON, but from the same kind of client) are no 500 either.
    for raw in ("path=%ff", "path=%ed%a0%80", "path=a%00b"):
        for route in ("file", "files"):
            response = client.get(f"/api/sessions/{session}/{route}?{raw}")
            assert 400 <= response.status_code < 500, (raw, response.text)
    for sid in ("%ff", "%ed%a0%80"):
        assert client.post(f"/api/sessions/{sid}/open").status_code == 404
    assert client.get("/api/sessions").status_code == 200  # still serving
    log = "".join(app.stderr)
    assert "Traceback" not in log and "RecursionError" not in log


def test_no_token_is_an_explicit_loopback_only_choice(tmp_path: Path, llm) -> None:
    refused = WebApp(
        tmp_path / "a", llm.base_url, args=("--host", "0.0.0.0", "--allow-remote", "--no-token")
    )
    with pytest.raises(AssertionError, match="no-token"):
        refused.start()
    app = WebApp(tmp_path / "b", llm.base_url, args=("--no-token",)).start()
    try:
        assert app.token is None and "?token" not in app.url
        with app.client() as c:
            assert c.get("/api/sessions").status_code == 200
        assert "--no-token" in "".join(app.stderr)
    finally:
        app.stop()


def test_a_chosen_token_is_used_and_hidden_from_the_agents(tmp_path: Path, llm) -> None:
    chosen = "my-chosen-token-0123456789"
    app = WebApp(tmp_path / "c", llm.base_url, env={"OPENMANUS_WEB_TOKEN": chosen}).start()
    try:
        assert app.token == chosen
        llm.push(tool_calls(call("bash", {"command": "env"})), text("ok"))
        with app.client() as c:
            sid = app.new_session(c, "show the environment")
            try:
                app.wait_idle(c, sid)
            except AssertionError:
                raise AssertionError("".join(app.stderr)[-3000:]) from None
            with c.stream("GET", f"/api/sessions/{sid}/events") as stream:
                raw = json.dumps([e for _, e in sse_entries(stream)])
        assert "PATH=" in raw  # the command ran and printed its environment
        assert chosen not in raw and "OPENMANUS_WEB_TOKEN" not in raw
        assert chosen not in str([r.body for r in llm.requests])
    finally:
        app.stop()
    bad = WebApp(tmp_path / "d", llm.base_url, env={"OPENMANUS_WEB_TOKEN": "a b;c"})
    with pytest.raises(AssertionError, match="OPENMANUS_WEB_TOKEN"):
        bad.start()


def test_remote_needs_allow_remote_and_a_token(tmp_path: Path, llm) -> None:
    refused = WebApp(tmp_path / "a", llm.base_url, args=("--host", "0.0.0.0"))
    with pytest.raises(AssertionError, match="not a loopback address"):
        refused.start()
    app = WebApp(tmp_path / "b", llm.base_url, args=("--host", "0.0.0.0", "--allow-remote"))
    app.start()
    try:
        token = app.token
        assert token is not None and len(token) >= 32
        base = f"http://127.0.0.1:{app.port}"
        with httpx.Client(base_url=base, timeout=30) as c:
            assert_error(c.get("/api/sessions"), 401, "token")
            assert_error(c.get("/"), 401)
            assert_error(c.get("/api/sessions", headers={"authorization": "Bearer wrong"}), 401)
            assert_error(c.get("/?token=wrong"), 401)
            bearer = {"authorization": f"Bearer {token}"}
            assert c.get("/api/sessions", headers=bearer).status_code == 200
            first = c.get("/", params={"token": token})
            assert first.status_code == 303 and first.headers["location"] == "/"
            assert "HttpOnly" in first.headers["set-cookie"]
        jar = {f"openmanus_token_{app.port}": token}
        with httpx.Client(base_url=base, timeout=30, cookies=jar) as c:
            sid = c.post("/api/sessions", json={"mode": "agent"}).json()["id"]
            with c.stream("GET", f"/api/sessions/{sid}/events") as stream:
                assert stream.status_code == 200
        wrong = {f"openmanus_token_{app.port}": "x"}
        with httpx.Client(base_url=base, timeout=30, cookies=wrong) as c:
            assert_error(c.get(f"/api/sessions/{sid}/events"), 401)
    finally:
        app.stop()
    assert token not in "".join(app.stderr)
    for log in (tmp_path / "b" / "logs").rglob("*"):
        if log.is_file():
            assert token not in log.read_text(errors="replace")


# ---- streams -------------------------------------------------------------------------------------


def test_a_dropped_stream_loses_nothing(client, app, llm) -> None:
    llm.push(
        tool_calls(call("bash", {"command": "echo one"})),
        slow(0.5, tool_calls(call("bash", {"command": "echo two"}))),
        slow(0.5, text("done after the client left")),
    )
    sid = app.new_session(client, "count")
    with client.stream("GET", f"/api/sessions/{sid}/events") as stream:
        seen = []
        for event_id, _entry in sse_entries(stream, until="tool_call"):
            seen.append(event_id)
    last = seen[-1]  # the client went away mid-task
    item = app.wait_idle(client, sid)
    assert item["state"] == "finished"
    with client.stream(
        "GET", f"/api/sessions/{sid}/events", headers={"last-event-id": str(last)}
    ) as stream:
        rest = list(sse_entries(stream))
    ids = [i for i, _ in rest]
    assert ids == list(range(last + 1, last + 1 + len(ids)))  # nothing skipped or repeated
    assert rest[-1][1]["final_answer"] == "done after the client left"
    assert any(e.get("output", "").endswith("two") for _, e in rest)
    assert_error(client.get(f"/api/sessions/{sid}/events", headers={"last-event-id": "x"}), 400)


def test_stop_keeps_what_the_command_printed_redacted(client, app, llm) -> None:
    """A command cut by Stop still reports what it printed until then (redacted like any
    output), as a tool result marked ``cancelled``."""
    command = f"echo printed-$((6*7)); echo {TEST_API_KEY}; sleep 300"
    llm.push(tool_calls(call("bash", {"command": command})))
    sid = app.new_session(client, "print then wait")
    wait_until(lambda: commands_in(app.workspace / "web" / sid, b"sleep"), 30, "the sleep")
    stopped = client.post(f"/api/sessions/{sid}/stop", json={}).json()
    assert stopped["stopped"] is True and stopped["session"]["state"] == "stopped"
    with client.stream("GET", f"/api/sessions/{sid}/events") as stream:
        results = [e for _, e in sse_entries(stream) if e["kind"] == "tool_result"]
    assert len(results) == 1 and results[0]["cancelled"] is True, results
    assert "printed-42" in results[0]["output"] and "***" in results[0]["output"]
    assert TEST_API_KEY not in json.dumps(results)


def test_the_listing_agrees_with_the_end_of_a_task(client, app, llm) -> None:
    """Once a task's end is in the event log, every listing says so (never ``running``
    with a finished state); ``/api/info`` names the server instance a page talks to."""
    llm.push(error(400, "the model refuses this"))
    sid = app.new_session(client, "fail at once")
    with client.stream("GET", f"/api/sessions/{sid}/events") as stream:
        end = [e for _, e in sse_entries(stream)][-1]
        assert end["kind"] == "task_finished" and end["state"] == "failed"
        listed = {s["id"]: s for s in client.get("/api/sessions").json()["sessions"]}
    assert (listed[sid]["state"], listed[sid]["running"]) == ("failed", False)
    instance = client.get("/api/info").json()["instance"]
    assert isinstance(instance, str) and len(instance) >= 16
    assert client.get("/api/info").json()["instance"] == instance


def test_entries_carry_their_run_across_tasks_and_a_restart(tmp_path: Path, llm) -> None:
    """Steps restart with every agent run; ``run`` tells them apart, live and in the history
    a restarted server replays, and it goes on counting after the restart."""
    app = WebApp(tmp_path, llm.base_url).start()
    try:
        with app.client() as client:
            llm.push(text("answer one"), text("answer two"))
            sid = app.new_session(client, "task one")
            app.wait_idle(client, sid)
            assert (
                client.post(f"/api/sessions/{sid}/tasks", json={"prompt": "2"}).status_code == 202
            )
            app.wait_idle(client, sid)
            assert _thought_runs(client, sid, 2) == [(1, "answer one"), (2, "answer two")]
            before = client.get("/api/info").json()["instance"]
        app.stop()
        app.start()
        with app.client() as client:
            # A new instance: a page that reconnects replays the session (new event numbers).
            assert client.get("/api/info").json()["instance"] != before
            assert client.post(f"/api/sessions/{sid}/open", json={}).status_code == 200
            assert _thought_runs(client, sid, 2) == [(1, "answer one"), (2, "answer two")]
            llm.push(text("answer three"))
            assert (
                client.post(f"/api/sessions/{sid}/tasks", json={"prompt": "3"}).status_code == 202
            )
            app.wait_idle(client, sid)
            assert _thought_runs(client, sid, 3)[-1] == (3, "answer three")
    finally:
        app.stop()


def _thought_runs(client: httpx.Client, sid: str, tasks: int) -> list[tuple[int, str]]:
    """(run, text) of each answer in the session's log, read up to its ``tasks``-th end."""
    found = []
    with client.stream("GET", f"/api/sessions/{sid}/events") as stream:
        for _, entry in sse_entries(stream, until="__never__"):
            if entry.get("kind") == "thought":
                found.append((entry["run"], entry["text"]))
            if entry.get("kind") == "task_finished":
                tasks -= 1
                if tasks == 0:
                    break
    return found


def test_secrets_never_reach_the_page(client, app, llm) -> None:
    llm.push(tool_calls(call("bash", {"command": f"echo {TEST_API_KEY}"})), text("ok"))
    sid = app.new_session(client, f"my key is {TEST_API_KEY}")
    app.wait_idle(client, sid)
    with client.stream("GET", f"/api/sessions/{sid}/events") as stream:
        raw = json.dumps([e for _, e in sse_entries(stream)])
    assert TEST_API_KEY not in raw and "***" in raw
    assert TEST_API_KEY not in client.get("/api/sessions").text
