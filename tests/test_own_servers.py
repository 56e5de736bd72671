"""``app.own_servers`` and the browser's URL check against it: every spelling of a registered
server's address is recognised (as Chromium reads it), other addresses are left alone."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator

import pytest

from app import own_servers
from app.exceptions import ToolError
from app.tool.browser.guard import blocked_note, request_patterns
from app.tool.browser.urls import check_url, check_url_resolved, own_server

PORT = 48765


@pytest.fixture
def web_ui() -> Iterator[int]:
    handle = own_servers.register("web UI", "127.0.0.1", PORT)
    yield handle
    own_servers.unregister(handle)


@pytest.mark.parametrize(
    ("host", "address"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("127.0.1", "127.0.0.1"),
        ("0x7f000001", "127.0.0.1"),
        ("0X7F000001", "127.0.0.1"),
        ("2130706433", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("127.0.0.1.", "127.0.0.1"),
        ("\uff11\uff12\uff17\u3002\uff10\u3002\uff10\u3002\uff11", "127.0.0.1"),
        ("0", "0.0.0.0"),
        ("[::1]", "::1"),
        ("[::ffff:127.0.0.1]", "::ffff:7f00:1"),
        ("example.com", None),
        ("1.2.3.4.5", None),
        ("256.0.0.1", None),
        ("0x1g", None),
        ("1_0.0.0.1", None),
        ("", None),
    ],
)
def test_ip_spellings_are_read_as_a_browser_reads_them(host: str, address: str | None) -> None:
    parsed = own_servers.parse_ip(host)
    assert parsed == (ipaddress.ip_address(address) if address else None)


def test_every_spelling_of_a_registered_server_is_refused(web_ui: int) -> None:
    for host in (
        "127.0.0.1",
        "localhost",
        "LOCALHOST.",
        "x.localhost",
        "127.1",
        "0x7f000001",
        "2130706433",
        "0177.0.0.1",
        "[::1]",
        "[::ffff:127.0.0.1]",
        "0.0.0.0",
        "%31%32%37.0.0.1",
        "user:pw@127.0.0.1",
    ):
        url = f"http://{host}:{PORT}/api/sessions"
        with pytest.raises(ToolError, match="own web UI"):
            check_url(url)
    for url in (
        f"localhost:{PORT}/api/sessions",
        f"http://127.0.0.1:{PORT}\\@example.com/",  # the browser reads the host before '\'
        f"view-source:http://127.0.0.1:{PORT}/",
        f"http://127.0.0.1:0{PORT}/",
    ):
        with pytest.raises(ToolError, match="own web UI"):
            check_url(url)
    # Other ports, other hosts and other schemes' defaults are left alone.
    for url in (
        f"http://127.0.0.1:{PORT + 1}/",
        f"http://example.com@127.0.0.1:{PORT + 1}/",
        f"http://127.0.0.1:{PORT}.example.com/",
        "http://localhost/",
        "https://example.com/",
    ):
        assert check_url(url) == url
    assert own_server(f"http://[::1]:{PORT}/").label == "web UI"  # type: ignore[union-attr]


async def test_names_are_resolved_and_unresolvable_ones_refused(web_ui: int) -> None:
    with pytest.raises(ToolError, match="own web UI"):
        await check_url_resolved(f"http://no-such-host.invalid:{PORT}/")
    # Not our port: nothing is looked up, the address passes.
    assert await check_url_resolved("http://no-such-host.invalid:1/") == (
        "http://no-such-host.invalid:1/"
    )


def test_unregistered_servers_are_ordinary_addresses() -> None:
    handle = own_servers.register("MCP server", "127.0.0.1", PORT)
    assert own_server(f"http://127.1:{PORT}/mcp") is not None
    own_servers.unregister(handle)
    assert own_server(f"http://127.1:{PORT}/mcp") is None
    assert check_url(f"http://127.0.0.1:{PORT}/") == f"http://127.0.0.1:{PORT}/"


def test_a_wildcard_bind_is_reached_through_this_machines_addresses() -> None:
    server = own_servers.OwnServer("web UI", "0.0.0.0", PORT)
    assert server.reaches(ipaddress.ip_address("127.0.0.5"), PORT)
    assert server.reaches(ipaddress.ip_address("::1"), PORT)
    assert not server.reaches(ipaddress.ip_address("127.0.0.1"), PORT + 1)
    assert not server.reaches(ipaddress.ip_address("192.0.2.1"), PORT)  # TEST-NET: not ours


def test_the_guard_watches_registered_ports_and_says_what_it_refused(web_ui: int) -> None:
    calls: list[int] = []
    cancel = own_servers.subscribe(lambda: calls.append(1))
    handle = own_servers.register("MCP server", "127.0.0.1", 80)
    own_servers.unregister(handle)
    cancel()
    assert calls == [1, 1]
    patterns = [p["urlPattern"] for p in request_patterns()]
    assert patterns[:2] == ["file:*", "filesystem:*"] and f"*:{PORT}/*" in patterns
    note = blocked_note([f"http://127.0.0.1:{PORT}/api/sessions", "file:///etc/passwd"])
    assert note is not None
    assert "local addresses" in note and "file:///etc/passwd" in note
    assert "own web UI" in note and f":{PORT}/api/sessions" in note
