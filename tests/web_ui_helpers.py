"""Starting the web UI (``python -m app.web``) as a real subprocess for the web tests."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.proc_utils import alive, processes_in
from tests.test_main_e2e import child_env, write_config

httpx = pytest.importorskip("httpx")  # the browser and search extras install it

__all__ = ["WebApp", "children_of", "commands_in", "free_port", "sse_entries", "wait_until"]

ROOT = Path(__file__).resolve().parent.parent


def wait_until(check: Any, timeout: float = 20.0, what: str = "condition") -> Any:
    """Poll ``check`` (an observable state, never a fixed sleep) until it is truthy."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)  # polls an observable condition; noqa: sleep-ok


def free_port() -> int:
    """A port nothing listens on now (for a server started later, or one that refuses)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def commands_in(directory: Path, program: bytes) -> list[int]:
    """Processes running ``program`` (e.g. ``b"sleep"``) with ``directory`` as their
    working directory."""
    found = []
    for pid in processes_in(directory):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].rsplit(b"/", 1)[-1] == program:
            found.append(pid)
    return found


def children_of(pid: int) -> list[int]:
    """Live processes whose parent is ``pid`` (from /proc)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            raw = Path(f"/proc/{name}/stat").read_bytes()
        except OSError:
            continue
        fields = raw[raw.rfind(b")") + 2 :].split()
        if int(fields[1]) == pid and fields[0] not in (b"Z", b"X"):
            found.append(int(name))
    return found


class WebApp:
    """One ``python -m app.web`` process on a free port. ``url`` is the login address it
    printed (``...?token=``); ``client()`` sends the token as a Bearer header."""

    def __init__(
        self,
        tmp: Path,
        base_url: str,
        *,
        workspace: Path | None = None,
        extra_config: str = "",
        args: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
        port: int = 0,
    ) -> None:
        self.tmp = tmp
        self.workspace = workspace or tmp / "ws"
        self.workspace.mkdir(parents=True, exist_ok=True)
        self.config = write_config(tmp, base_url)
        if extra_config:
            with self.config.open("a") as f:
                f.write("\n" + extra_config + "\n")
        self.args = args
        self.env = env or {}
        #: 0: any free port at each start; a fixed one lets a page find a restarted server.
        self.fixed_port = port
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""
        self.stderr: list[str] = []

    def start(self) -> WebApp:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "app.web",
                "-c",
                str(self.config),
                "--port",
                str(self.fixed_port),
                "-w",
                str(self.workspace),
                *self.args,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            env={**child_env(self.tmp), **self.env},
            cwd=ROOT,
        )
        assert self.proc.stdout is not None and self.proc.stderr is not None
        threading.Thread(target=self._drain, args=(self.proc.stderr,), daemon=True).start()
        line = self.proc.stdout.readline().strip()
        if not line.startswith("OpenManus web UI: "):
            self.proc.wait(10)
            raise AssertionError(f"the server did not start: {line!r} {''.join(self.stderr)}")
        self.url = line.split(": ", 1)[1]
        return self

    def _drain(self, stream: Any) -> None:
        for line in stream:
            self.stderr.append(line)

    @property
    def base(self) -> str:
        return self.url.split("?", 1)[0].rstrip("/")

    @property
    def token(self) -> str | None:
        """The access token of this start (a new one each start), None with --no-token."""
        return self.url.split("?token=", 1)[1] if "?token=" in self.url else None

    @property
    def login_url(self) -> str:
        """What a person opens: the token is traded for a cookie and leaves the address."""
        return self.url

    @property
    def port(self) -> int:
        return int(self.base.rsplit(":", 1)[1])

    def client(self, *, login: bool = True, **kwargs: Any) -> httpx.Client:
        """An API client; ``login=False``: without the token."""
        headers = dict(kwargs.pop("headers", {}))
        if login and self.token:
            headers["authorization"] = f"Bearer {self.token}"
        return httpx.Client(base_url=self.base, timeout=30, headers=headers, **kwargs)

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        return proc.returncode

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and alive(self.proc.pid)

    def new_session(
        self, client: httpx.Client, prompt: str | None = None, mode: str = "agent"
    ) -> str:
        body: dict[str, Any] = {"mode": mode}
        if prompt is not None:
            body["prompt"] = prompt
        response = client.post("/api/sessions", json=body)
        assert response.status_code == 201, response.text
        return str(response.json()["id"])

    def wait_idle(self, client: httpx.Client, sid: str, timeout: float = 60) -> dict[str, Any]:
        def done() -> dict[str, Any] | None:
            for item in client.get("/api/sessions").json()["sessions"]:
                if item["id"] == sid and not item["running"]:
                    return item
            return None

        return wait_until(done, timeout, f"session {sid} to finish")


def sse_entries(
    response: httpx.Response, until: str = "task_finished", limit: int = 10_000
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(id, entry) of an SSE response, up to and including the first ``until`` entry."""
    event_id = 0
    for line in response.iter_lines():
        if line.startswith("id: "):
            event_id = int(line[4:])
        elif line.startswith("data: "):
            entry = json.loads(line[6:])
            yield event_id, entry
            limit -= 1
            if entry.get("kind") == until or limit <= 0:
                return
