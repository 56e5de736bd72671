"""What the A2A tests share: the server program on a free port of 127.0.0.1, the official
Python client (``a2a-sdk``) over real HTTP, a recording webhook, and a few readers of what the
client saw."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.types import GetTaskRequest, Message, Part, Role, SendMessageRequest, StreamResponse, Task

from app.testing import ScriptedLLMServer, keyed_server
from tests.npm_tools import NPM_DIR, node_env, npm_bin
from tests.test_main_e2e import child_env, write_config

ROOT = Path(__file__).resolve().parent.parent
#: How a server stopped by SIGTERM exits: uvicorn shuts down, then re-raises the signal.
STOPPED = (0, -signal.SIGTERM)


class A2AServer:
    """One ``python -m protocol.a2a.app.main`` on a free port of 127.0.0.1."""

    def __init__(
        self,
        tmp: Path,
        base_url: str,
        env: dict[str, str] | None = None,
        args: tuple[str, ...] = (),
    ) -> None:
        self.tmp = tmp
        self.workspace = tmp / "ws"
        config = write_config(tmp, base_url)
        where = ["--host", "127.0.0.1", "--port", "0", "-w", str(self.workspace)]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "protocol.a2a.app.main", "-c", str(config), *where, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            env={**child_env(tmp), **(env or {})},
            cwd=ROOT,
        )
        self.stderr: list[str] = []
        assert self.proc.stdout is not None and self.proc.stderr is not None
        threading.Thread(target=self.stderr.extend, args=(self.proc.stderr,), daemon=True).start()
        line = self.proc.stdout.readline().strip()
        if not line.startswith("OpenManus A2A agent: "):
            self.proc.wait(10)
            raise AssertionError(f"the server did not start: {line!r} {''.join(self.stderr)}")
        self.url = line.split(": ", 1)[1]

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode


def run_program(tmp: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    """The server program with ``args`` (and a config naming a model that never answers), to
    its end: for options it refuses."""
    config = write_config(tmp, "http://127.0.0.1:9/v1")
    return subprocess.run(
        [sys.executable, "-m", "protocol.a2a.app.main", "-c", str(config), "--port", "0", *args],
        capture_output=True,
        text=True,
        env={**child_env(tmp), **(env or {})},
        cwd=ROOT,
        timeout=60,
    )


def run_js(script: str, url: str, *args: str) -> Any:
    """``node tests/<script> <url> <@a2a-js/sdk dir> <args>``, to its end: what it printed,
    decoded (one JSON object)."""
    npm_bin("mcp-inspector")  # fails, naming the setup script, when the npm tools are missing
    sdk = NPM_DIR / "node_modules" / "@a2a-js" / "sdk"
    assert sdk.is_dir(), "run bash scripts/setup-npm-tools.sh"
    done = subprocess.run(
        ["node", str(ROOT / "tests" / script), url, str(sdk), *args],
        capture_output=True,
        text=True,
        env=node_env(),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def scripted_model(scripts: dict[str, list[Any]]) -> Any:
    """A module's ``llm`` fixture: the scripted model answering ``scripts`` by prompt."""

    @pytest.fixture(scope="module")
    def llm() -> Iterator[ScriptedLLMServer]:
        with keyed_server(scripts) as server:
            yield server

    return llm


def webhook() -> Any:
    """A module's fixture of one recording :class:`Webhook`."""

    @pytest.fixture(scope="module")
    def hook() -> Iterator[Webhook]:
        with Webhook() as running:
            yield running

    return hook


@contextlib.contextmanager
def a2a_server(tmp: Path, base_url: str, **options: Any) -> Iterator[A2AServer]:
    running = A2AServer(tmp, base_url, **options)
    try:
        yield running
    finally:
        assert running.stop() in STOPPED, "".join(running.stderr)


@contextlib.asynccontextmanager
async def connect(
    server: A2AServer, token: str | None = None, *, streaming: bool = True
) -> AsyncIterator[Any]:
    """The official Python client of ``server``, as the caller holding ``token``."""
    headers = {"authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(timeout=60, headers=headers) as http:
        yield await create_client(server.url, ClientConfig(streaming=streaming, httpx_client=http))


def user(text: str, *, task_id: str = "", context_id: str = "") -> SendMessageRequest:
    message = Message(
        role=Role.ROLE_USER,
        message_id=f"m-{time.monotonic_ns()}",
        parts=[Part(text=text)],
        task_id=task_id,
        context_id=context_id,
    )
    return SendMessageRequest(message=message)


async def events(client: Any, request: SendMessageRequest) -> list[StreamResponse]:
    return [event async for event in client.send_message(request)]


async def run(client: Any, request: SendMessageRequest) -> tuple[list[StreamResponse], Task]:
    """The events of one request, and the task as the server holds it afterwards."""
    seen = await events(client, request)
    first = seen[0]
    task_id = first.task.id if first.HasField("task") else first.status_update.task_id
    return seen, await client.get_task(GetTaskRequest(id=task_id))


async def finished(client: Any, request: SendMessageRequest) -> Task:
    return (await run(client, request))[1]


async def drain(stream: AsyncIterator[StreamResponse]) -> list[StreamResponse]:
    return [event async for event in stream]


def answer(task: Task) -> str:
    return "".join(p.text for a in task.artifacts for p in a.parts)


def states(seen: list[StreamResponse]) -> list[int]:
    return [e.status_update.status.state for e in seen if e.HasField("status_update")]


def kinds(seen: list[StreamResponse]) -> list[str]:
    found = []
    for e in seen:
        if e.HasField("status_update") and e.status_update.status.message.HasField("metadata"):
            found.append(e.status_update.status.message.metadata["kind"])
    return found


def rpc(server: A2AServer, method: str, params: dict[str, Any], **headers: str) -> Any:
    """One raw JSON-RPC call (as curl or the a2a-tck send it): the decoded answer."""
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return httpx.post(server.url, json=body, headers=headers, timeout=60).json()


class Webhook:
    """An HTTP server on 127.0.0.1 recording every request (body, headers); ``redirect``
    answers each with a 307 to that URL instead of 200."""

    def __init__(self, redirect: str | None = None) -> None:
        self.received: list[tuple[dict[str, Any], dict[str, str]]] = []
        self.arrived = threading.Condition()
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                with hook.arrived:
                    hook.received.append((json.loads(body or b"{}"), dict(self.headers)))
                    hook.arrived.notify_all()
                self.send_response(307 if redirect else 200)
                if redirect:
                    self.send_header("location", redirect)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Webhook:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def wait_for(self, text: str, timeout: float = 15) -> bool:
        """Whether a request whose body holds ``text`` arrived within ``timeout`` seconds."""
        with self.arrived:
            return self.arrived.wait_for(
                lambda: any(text in json.dumps(b) for b, _ in self.received), timeout
            )
