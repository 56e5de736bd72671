"""LlamaServer's start-up with a stand-in program in place of llama-cpp-python's Python (its
``python=`` option): a port another process took between choosing and binding it is retried on a
new port; any other failure is reported at once. Tier ``real_model``: the command it starts is
the llama server's (``-m llama_cpp.server``), and parallel workers keep it to one worker."""

from __future__ import annotations

import sys
import textwrap
import urllib.request
from pathlib import Path

import pytest

from app.testing.llama import LlamaServer, LlamaServerError

pytestmark = pytest.mark.real_model

STAND_IN = """
import json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

args = sys.argv[1:]
port = int(args[args.index("--port") + 1])
attempts = Path({attempts!r})
with attempts.open("a") as f:
    f.write(f"{{port}}\\n")
failing = {failing}
if len(attempts.read_text().split()) <= failing:
    print({message!r}.format(port=port), flush=True)
    sys.exit(1)

class Models(BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({{"data": [{{"id": "local"}}]}}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

HTTPServer(("127.0.0.1", port), Models).serve_forever()
"""
IN_USE = (
    "ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', {port}): "
    "address already in use"
)


def stand_in(tmp_path: Path, failing: int, message: str = IN_USE) -> tuple[Path, Path]:
    """A program that fails its first ``failing`` starts with ``message``, then serves
    ``/v1/models``; returns it and the file listing the port of each start."""
    attempts = tmp_path / "attempts"
    program = tmp_path / "python"
    code = STAND_IN.format(attempts=str(attempts), failing=failing, message=message)
    program.write_text(f"#!{sys.executable}\n{textwrap.dedent(code)}")
    program.chmod(0o755)
    return program, attempts


def server(tmp_path: Path, program: Path) -> LlamaServer:
    log = tmp_path / "server.log"
    return LlamaServer(tmp_path / "model.gguf", python=program, log_path=log, startup_timeout=30)


def test_a_port_taken_before_the_server_bound_it_is_retried(tmp_path: Path) -> None:
    program, attempts = stand_in(tmp_path, failing=1)
    llama = server(tmp_path, program).start()
    try:
        assert llama.running
        ports = [int(p) for p in attempts.read_text().split()]
        assert len(ports) == 2 and llama.port == ports[-1]
        with urllib.request.urlopen(f"{llama.base_url}/models", timeout=5) as response:
            assert b'"local"' in response.read()
        assert llama.log_text().count("address already in use") == 1
    finally:
        llama.stop()
    assert not llama.running


def test_ports_taken_again_and_again_give_up_after_three_tries(tmp_path: Path) -> None:
    program, attempts = stand_in(tmp_path, failing=10)
    llama = server(tmp_path, program)
    with pytest.raises(LlamaServerError, match="address already in use"):
        llama.start()
    assert len(attempts.read_text().split()) == 3
    assert not llama.running


def test_any_other_start_failure_is_reported_at_once(tmp_path: Path) -> None:
    program, attempts = stand_in(tmp_path, failing=10, message="model file is corrupt")
    llama = server(tmp_path, program)
    with pytest.raises(LlamaServerError, match="model file is corrupt"):
        llama.start()
    assert len(attempts.read_text().split()) == 1
    assert not llama.running
