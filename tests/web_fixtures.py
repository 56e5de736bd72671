"""A tiny web server on 127.0.0.1 for browser and search tests, and the leak check.

Routes are registered as ``path -> (status, content_type, body)`` or a callable taking the
request and returning that triple; ``redirects`` maps a path to the address it answers
``302 Found`` with; ``hang`` routes accept the request and never answer (until
the server stops). Every request is recorded with its path and query.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from tests.proc_utils import processes_mentioning

__all__ = ["Page", "WebServer", "isolated_tempdir", "processes_mentioning"]

Page = tuple[int, str, bytes | str]


class WebServer:
    def __init__(self) -> None:
        self.routes: dict[str, Page | Callable[[dict[str, Any]], Page]] = {}
        self.hanging: set[str] = set()
        self.redirects: dict[str, str] = {}
        self.requests: list[dict[str, Any]] = []
        self._stop = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return None

            def _serve(self) -> None:
                parsed = urlparse(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode() if length else ""
                request = {
                    "method": self.command,
                    "path": parsed.path,
                    "query": {k: v[0] for k, v in parse_qs(parsed.query).items()},
                    "form": {k: v[0] for k, v in parse_qs(body).items()},
                    "headers": dict(self.headers),
                }
                server.requests.append(request)
                if parsed.path in server.hanging:
                    server._stop.wait()
                    return
                if parsed.path in server.redirects:
                    self.send_response(302)
                    self.send_header("Location", server.redirects[parsed.path])
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                route = server.routes.get(parsed.path)
                if route is None:
                    status, kind, content = 404, "text/plain", b"not found"
                else:
                    status, kind, content = route(request) if callable(route) else route
                data = content.encode() if isinstance(content, str) else content
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = _serve
            do_POST = _serve

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def html(self, path: str, body: str, status: int = 200) -> str:
        self.routes[path] = (status, "text/html; charset=utf-8", body)
        return self.url + path

    def hits(self, path: str) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["path"] == path]

    def __enter__(self) -> WebServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(5)


@contextmanager
def isolated_tempdir() -> Iterator[Path]:
    """Point this process's temp dir (and its children's) at a new short directory; on exit,
    check that no browser left a process or a file there, then remove it.

    Short, because Chromium puts a Unix socket (108-byte path limit) in its temp dir.
    """
    base = Path(tempfile.mkdtemp(prefix="omt-"))
    base.chmod(0o711)  # Chromium runs as an unprivileged user when we are root: let it pass
    old_tempdir, old_env = tempfile.tempdir, os.environ.get("TMPDIR")
    tempfile.tempdir = str(base)
    os.environ["TMPDIR"] = str(base)
    try:
        yield base
    finally:
        tempfile.tempdir = old_tempdir
        if old_env is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = old_env
    leftovers = sorted(p.name for p in base.iterdir())
    running = processes_mentioning(str(base))
    shutil.rmtree(base, ignore_errors=True)
    assert not leftovers, f"files left in the temp dir: {leftovers}"
    assert not running, f"browser processes still running: {running}"
