"""Push-notification webhooks of the A2A server (issue 34, item 7): a caller may not make the
server POST to loopback, link-local, private, multicast, unspecified or reserved addresses,
however the address is written (``0``, ``2130706433``, IPv4-mapped IPv6, a name resolving to
loopback), nor through a redirect; what the operator allows (``--allow-push-target``) is
reached at the address that was checked, without a second lookup. Driven with a2a-sdk's
client over real HTTP; the webhooks are real servers on 127.0.0.1."""

from __future__ import annotations

import ipaddress
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from a2a.types import SendMessageConfiguration, TaskPushNotificationConfig, TaskState
from a2a.utils.errors import InvalidParamsError

from app.a2a.push import PinnedTransport, PushTargets, TargetRule, not_public
from app.testing import ScriptedLLMServer
from tests.a2a_support import (
    A2AServer,
    Webhook,
    a2a_server,
    connect,
    events,
    finished,
    scripted_model,
    user,
    webhook,
)

pytestmark = pytest.mark.e2e

SCRIPTS: dict[str, list[Any]] = {
    "target": ["Target."],
    "allowed push": ["Pushed."],
    "named push": ["Named."],
    "redirected push": ["Redirected."],
    "refused push": ["Never runs."],
}


llm = scripted_model(SCRIPTS)


#: A loopback service the server may not reach: it must never get a request.
victim = webhook()


#: The one webhook the operator allows (its address and port).
hook = webhook()


@pytest.fixture(scope="module")
def redirector(victim: Webhook) -> Iterator[Webhook]:
    """Also allowed; it answers every POST with a redirect to the victim."""
    with Webhook(redirect=victim.url) as running:
        yield running


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory,
    llm: ScriptedLLMServer,
    hook: Webhook,
    redirector: Webhook,
) -> Iterator[A2AServer]:
    args = (
        *("--allow-push-target", f"127.0.0.1:{hook.port}"),
        *("--allow-push-target", f"127.0.0.1:{redirector.port}"),
        *("--push-resolve", "hook.test=127.0.0.1"),
        *("--push-resolve", "evil.test=127.0.0.1"),
    )
    with a2a_server(tmp_path_factory.mktemp("a2a-push"), llm.base_url, args=args) as running:
        yield running


def _with_push(text: str, url: str, token: str = "push-token") -> Any:
    request = user(text)
    push = TaskPushNotificationConfig(url=url, token=token)
    request.configuration.CopyFrom(SendMessageConfiguration(task_push_notification_config=push))
    return request


def _refused(victim: Webhook) -> list[str]:
    v = victim.port
    return [
        f"http://0:{v}/",
        f"http://0.0.0.0:{v}/",
        f"http://2130706433:{v}/",
        f"http://0x7f.1:{v}/",
        f"http://127.1:{v}/",
        f"http://127.0.0.1:{v}/",  # loopback, on a port the operator did not allow
        f"http://127.0.0.2:{v}/",
        f"http://[::1]:{v}/",
        f"http://[::]:{v}/",
        f"http://[::ffff:127.0.0.1]:{v}/",
        f"http://[::ffff:7f00:1]:{v}/",
        f"http://[::127.0.0.1]:{v}/",  # IPv4-compatible
        f"http://[64:ff9b::7f00:1]:{v}/",  # NAT64
        f"http://[2002:7f00:1::]:{v}/",  # 6to4
        f"http://localhost:{v}/",
        f"http://evil.test:{v}/",  # a name resolving to loopback
        "http://169.254.169.254/latest/meta-data/",
        "http://[fe80::1]/",
        "http://10.0.0.1/",
        "http://172.16.0.1/",
        "http://192.168.1.1/",
        "http://100.64.0.1/",
        "http://[fd00::1]/",
        "http://224.0.0.1/",
        "http://[ff02::1]/",
        "http://240.0.0.1/",
        "http://255.255.255.255/",
        "ftp://example.com/",
        "file:///etc/passwd",
        "http://no-such-host.invalid/",
    ]


async def test_webhooks_to_non_public_addresses_are_refused_however_written(server, victim) -> None:
    async with connect(server, streaming=False) as client:
        target = await finished(client, user("target"))
        for url in _refused(victim):
            with pytest.raises(InvalidParamsError) as caught:
                await events(client, _with_push("refused push", url))
            assert "refused" in str(caught.value) or "http(s)" in str(caught.value), url
            config = TaskPushNotificationConfig(task_id=target.id, url=url, token="t")
            with pytest.raises(InvalidParamsError):
                await client.create_task_push_notification_config(config)
    assert victim.received == []


async def test_an_allowed_webhook_gets_every_update(server, hook) -> None:
    async with connect(server, streaming=False) as client:
        task = (await events(client, _with_push("allowed push", hook.url, "secret-7")))[0].task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert hook.wait_for("TASK_STATE_COMPLETED")
    mine = [(b, h) for b, h in hook.received if task.id in str(b)]
    assert mine and {h.get("X-A2A-Notification-Token") for _, h in mine} == {"secret-7"}


async def test_a_name_goes_to_the_address_that_was_checked(server, hook) -> None:
    """``hook.test`` has no DNS record: only the checked, pinned address can reach the hook,
    and the request still names the host the caller gave."""
    url = f"http://hook.test:{hook.port}/named"
    async with connect(server, streaming=False) as client:
        task = (await events(client, _with_push("named push", url)))[0].task
    assert hook.wait_for(task.id)
    hosts = {h.get("Host") for b, h in hook.received if task.id in str(b)}
    assert hosts == {f"hook.test:{hook.port}"}


async def test_a_redirect_to_loopback_is_not_followed(server, redirector, victim) -> None:
    async with connect(server, streaming=False) as client:
        task = (await events(client, _with_push("redirected push", redirector.url)))[0].task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert redirector.wait_for("TASK_STATE_COMPLETED")  # the allowed target got them all
    assert victim.received == []


# ---- the transport itself, with a resolver hook (no DNS, no system files) --------------------


class _Answer(BaseHTTPRequestHandler):
    body = b"ok"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response(200)
        self.send_header("content-length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: Any) -> None:
        pass


class _Huge(_Answer):
    body = b"x" * (1 << 20)


@pytest.fixture
def answering() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


async def test_one_lookup_per_request_and_the_connection_goes_to_its_answer(answering) -> None:
    port = answering.server_address[1]
    lookups: list[str] = []
    answers = iter([["127.0.0.1"], ["127.0.0.1"], ["127.0.0.1", "10.0.0.1"]])

    async def rebinding(host: str, _: int) -> list[str]:
        lookups.append(host)
        return next(answers)

    targets = PushTargets([TargetRule.parse(f"127.0.0.1:{port}")], resolver=rebinding)
    async with httpx.AsyncClient(transport=PinnedTransport(targets)) as client:
        for _ in range(2):
            response = await client.post(f"http://rebind.test:{port}/", json={})
            assert response.status_code == 200
        # An allowed address next to a private one: refused whole, never a pick of the two.
        with pytest.raises(httpx.ConnectError, match="private"):
            await client.post(f"http://rebind.test:{port}/", json={})
    assert lookups == ["rebind.test"] * 3


async def test_a_webhooks_answer_is_read_up_to_a_limit(answering) -> None:
    answering.RequestHandlerClass = _Huge
    port = answering.server_address[1]
    targets = PushTargets([TargetRule.parse(f"127.0.0.1:{port}")])
    async with httpx.AsyncClient(transport=PinnedTransport(targets)) as client:
        with pytest.raises(httpx.ReadError, match="too long"):
            await client.post(f"http://127.0.0.1:{port}/", json={})


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("127.0.0.1", "loopback"),
        ("0.0.0.0", "unspecified"),
        ("::ffff:10.1.2.3", "private"),
        ("::ffff:169.254.169.254", "link-local"),
        ("2002:a9fe:a9fe::", "link-local"),  # 6to4 of 169.254.169.254
        ("64:ff9b::a00:1", "private"),  # NAT64 of 10.0.0.1
        ("::10.0.0.1", "private"),
        ("100.64.0.1", "not public"),
        ("ff05::1", "multicast"),
        ("8.8.8.8", None),
        ("2606:4700:4700::1111", None),
    ],
)
def test_addresses_are_judged_with_what_they_carry(address: str, why: str | None) -> None:
    found = not_public(ipaddress.ip_address(address))
    assert (found is None) if why is None else (found is not None and found.startswith(why))


def test_target_rules_parse_networks_and_ports() -> None:
    rule = TargetRule.parse("[::1]:8080")
    assert rule.allows(ipaddress.ip_address("::1"), 8080)
    assert not rule.allows(ipaddress.ip_address("::1"), 8081)
    net = TargetRule.parse("10.0.0.0/8")
    assert net.allows(ipaddress.ip_address("10.9.8.7"), 1) and net.port is None
    assert TargetRule.parse("[fd00::]/8").allows(ipaddress.ip_address("fd12::1"), 443)
    for bad in ("localhost", "10.0.0.0/33", "127.0.0.1:0", "127.0.0.1:http"):
        with pytest.raises(ValueError):
            TargetRule.parse(bad)
