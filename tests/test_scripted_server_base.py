"""What the three scripted servers share (``app.testing.scripted_base.ScriptedServer``), held
the same for each over real HTTP: the script then the responder, a failing responder, the
request log and its bound, clients that leave mid-answer, and waiting for requests."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from app.testing import ScriptedLLMServer, cut, slow, stall, text
from app.testing.anthropic_server import SCRIPTED_API_KEY, ScriptedAnthropicServer
from app.testing.bedrock_server import ScriptedBedrockServer
from app.testing.scripted_base import ScriptedServer

TOKEN = "scripted-bedrock-api-key"


@dataclass(frozen=True)
class Wire:
    """How to make one of the servers and ask it for an answer over plain HTTP."""

    name: str
    make: Callable[..., ScriptedServer[Any]]
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    stream_path: str | None = None

    def ask(
        self, server: ScriptedServer[Any], *, stream: bool = False, read_timeout: float = 30.0
    ) -> httpx.Response:
        """One request; ``read_timeout`` is how long the client waits for the next bytes
        (connecting and sending get 30 s, so a loaded machine does not fail the test)."""
        path, body = self.path, dict(self.body)
        if stream and self.stream_path is not None:
            path = self.stream_path
        elif stream:
            body["stream"] = True
        return httpx.post(
            f"{server.root_url}{path}",
            json=body,
            headers=self.headers,
            timeout=httpx.Timeout(30.0, read=read_timeout),
        )

    def text_of(self, response: httpx.Response) -> str:
        data = response.json()
        if self.name == "openai":
            return str(data["choices"][0]["message"]["content"])
        if self.name == "anthropic":
            return str(data["content"][0]["text"])
        return str(data["output"]["message"]["content"][0]["text"])


WIRES = [
    Wire(
        "openai",
        ScriptedLLMServer,
        "/v1/chat/completions",
        {},
        {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
    ),
    Wire(
        "anthropic",
        ScriptedAnthropicServer,
        "/v1/messages",
        {"x-api-key": SCRIPTED_API_KEY, "anthropic-version": "2023-06-01"},
        {"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]},
    ),
    Wire(
        "bedrock",
        lambda *args, **kw: ScriptedBedrockServer(*args, bearer_token=TOKEN, **kw),
        "/model/m/converse",
        {"authorization": f"Bearer {TOKEN}"},
        {"messages": [{"role": "user", "content": [{"text": "hi"}]}]},
        stream_path="/model/m/converse-stream",
    ),
]


@pytest.fixture(params=WIRES, ids=[wire.name for wire in WIRES])
def wire(request: pytest.FixtureRequest) -> Wire:
    wire: Wire = request.param
    return wire


@pytest.fixture
def serve(wire: Wire) -> Iterator[Callable[..., ScriptedServer[Any]]]:
    started: list[ScriptedServer[Any]] = []

    def start(*args: Any, **kwargs: Any) -> ScriptedServer[Any]:
        server = wire.make(*args, **kwargs).start()
        started.append(server)
        return server

    try:
        yield start
    finally:
        for server in started:
            server.stop()


def test_the_script_then_the_responder_then_a_clear_refusal(wire: Wire, serve: Any) -> None:
    seen: list[int] = []

    def responder(captured: Any) -> Any:
        seen.append(captured.index)
        return text(f"made for {captured.index}")

    server = serve([text("scripted")], responder)
    assert wire.text_of(wire.ask(server)) == "scripted"
    assert wire.text_of(wire.ask(server)) == "made for 1"
    assert seen == [1] and server.remaining == 0
    server.responder = None
    refused = wire.ask(server)
    assert refused.status_code == 400 and "exhausted" in refused.text
    assert [r.index for r in server.requests] == [0, 1, 2] and server.errors == []


def test_a_failing_responder_is_a_500_and_recorded_and_the_server_goes_on(
    wire: Wire, serve: Any
) -> None:
    def responder(captured: Any) -> Any:
        raise RuntimeError(f"broken for {captured.index}")

    server = serve([], responder)
    failed = wire.ask(server)
    assert failed.status_code == 500 and "broken for 0" in failed.text
    assert [str(e) for e in server.errors] == ["broken for 0"]
    server.responder = None
    server.push("fine")
    assert wire.text_of(wire.ask(server)) == "fine"


def test_replies_pushed_from_other_threads_are_all_served(wire: Wire, serve: Any) -> None:
    server = serve()
    pushers = [threading.Thread(target=server.push, args=(f"reply {i}",)) for i in range(4)]
    for pusher in pushers:
        pusher.start()
    for pusher in pushers:
        pusher.join()
    answers = {wire.text_of(wire.ask(server)) for _ in range(4)}
    assert answers == {f"reply {i}" for i in range(4)} and server.remaining == 0


def test_a_client_that_gives_up_on_a_slow_answer_is_recorded(wire: Wire, serve: Any) -> None:
    server = serve([slow(30, text("too late")), text("next")])
    with pytest.raises(httpx.TimeoutException):
        wire.ask(server, read_timeout=0.5)
    assert server.wait_for_disconnects(1, timeout=10)
    assert server.disconnects == [0]
    assert wire.text_of(wire.ask(server)) == "next"  # the slow reply was not kept for it


def test_a_client_that_hangs_up_on_a_stalled_stream_is_recorded(wire: Wire, serve: Any) -> None:
    server = serve([stall("a streamed answer of several words", after=2, seconds=30)])
    with pytest.raises(httpx.TimeoutException):
        wire.ask(server, stream=True, read_timeout=0.5)
    assert server.wait_for_disconnects(1, timeout=10)
    assert server.disconnects == [0] and server.errors == []


def test_a_plain_answer_cut_short_leaves_the_client_an_incomplete_body(
    wire: Wire, serve: Any
) -> None:
    server = serve([cut("an answer that never arrives whole", after=1), "whole"])
    with pytest.raises(httpx.RemoteProtocolError):
        wire.ask(server)
    assert wire.text_of(wire.ask(server)) == "whole"
    assert server.errors == []


def test_waiting_for_requests_from_async_code_leaves_the_loop_free(wire: Wire, serve: Any) -> None:
    server = serve(["one", "two"])

    async def scenario() -> tuple[bool, bool]:
        # The requests are sent from this loop while the wait is pending: a wait that held
        # the loop would see none of them.
        waiting = asyncio.create_task(server.wait_for_requests_async(2, timeout=30))
        await asyncio.to_thread(wire.ask, server)
        await asyncio.to_thread(wire.ask, server)
        done = await waiting
        late = await server.wait_for_requests_async(3, timeout=0.2)
        return done, late

    done, late = asyncio.run(scenario())
    assert done and not late


def test_a_stopped_server_wakes_whoever_waits(wire: Wire, serve: Any) -> None:
    server = serve()
    results: list[bool] = []
    waiter = threading.Thread(target=lambda: results.append(server.wait_for_requests(1, 60)))
    waiter.start()
    server.stop()
    waiter.join(timeout=30)
    assert results == [False]


@pytest.mark.parametrize("wire", [w for w in WIRES if w.name != "bedrock"], indirect=True)
def test_the_log_keeps_the_last_requests_and_the_count_stays_exact(wire: Wire, serve: Any) -> None:
    server = serve(["a", "b", "c", "d", "e"], keep_requests=2)
    for _ in range(5):
        wire.ask(server)
    assert [r.index for r in server.requests] == [3, 4]
    assert server.wait_for_requests(5, timeout=1)


def test_the_request_log_holds_what_each_client_sent(wire: Wire, serve: Any) -> None:
    server = serve(["ok"])
    wire.ask(server)
    (captured,) = server.requests
    assert json.loads(captured.raw) == wire.body and captured.body == wire.body
