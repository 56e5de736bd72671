"""``python -m bench.a2a_memory``: the A2A server's memory under big tasks and big bodies.

Starts ``python -m protocol.a2a.app.main`` against a scripted model on 127.0.0.1, runs
``--runs`` tasks that each write ``--files`` files of 1 MiB (each comes back as an artifact),
and prints the server's resident memory (``VmRSS``, and its peak ``VmHWM``) after each, the
size of one ``ListTasks`` with artifacts, and the memory after a 256 MiB request body. It
asserts nothing: docs/a2a.md#limits says what the bounds are, this shows what they cost.

``--root`` runs another checkout's server (to compare with an older one); arguments after
``--`` go to the server (``-- --task-memory 64``).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from app.testing import call, keyed_server, tool_calls

ROOT = Path(__file__).resolve().parent.parent
MIB = 1 << 20


def _rss(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of ``pid`` in MB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(value.split()[0]) / 1024
    return fields["VmRSS"], fields["VmHWM"]


def _send(url: str, text: str) -> dict[str, Any]:
    message = {"messageId": text, "role": "ROLE_USER", "parts": [{"text": text}]}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    headers = {"A2A-Version": "1.0"}
    reply = httpx.post(url, json=body, headers=headers, timeout=600).json()
    return dict(reply)


def _flood(url: str, size: int) -> str:
    """POST ``size`` bytes of JSON without a token; what came back (or how it ended)."""
    host, port = url.split("//")[1].strip("/").rsplit(":", 1)
    head = (
        f"POST / HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {size}\r\n\r\n"
    ).encode()
    chunk = b" " * MIB
    with socket.create_connection((host, int(port)), timeout=120) as sock:
        sock.sendall(head + b'{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"x": "')
        try:
            for _ in range(size // MIB - 1):
                sock.sendall(chunk)
            sock.sendall(b'"}}')
            return sock.recv(200).split(b"\r\n", 1)[0].decode()
        except OSError as e:
            return f"connection ended while sending ({type(e).__name__})"


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    server_args = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(prog="python -m bench.a2a_memory", description=__doc__)
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout whose server runs")
    args = parser.parse_args(argv)
    code = f"for i in range({args.files}): open(f'f{{i}}.bin', 'wb').write(bytes([i]) * {MIB})"
    scripts: dict[str, list[Any]] = {
        f"files {n}": [tool_calls(call("python_execute", {"code": code})), "Done."]
        for n in range(args.runs)
    }
    with keyed_server(scripts) as llm, tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "config.toml"
        config.write_text(
            f'[llm]\nmodel = "m"\nbase_url = "{llm.base_url}"\napi_key = "sk-bench"\n'
            "max_retries = 0\n"
        )
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "protocol.a2a.app.main", "-c", str(config)),
                *("--host", "127.0.0.1", "--port", "0", "-w", str(Path(tmp) / "ws")),
                *server_args,
            ],
            cwd=args.root,
            env={**os.environ, "HOME": tmp, "OPENMANUS_LOG_DIR": tmp, "OPENMANUS_CACHE_DIR": tmp},
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            assert proc.stdout is not None
            url = proc.stdout.readline().split(": ", 1)[1].strip()
            started = time.monotonic()
            rows = [("started", *_rss(proc.pid))]
            for n in range(args.runs):
                reply = _send(url, f"files {n}")
                state = reply.get("result", {}).get("task", {}).get("status", {}).get("state")
                rows.append((f"task {n + 1} ({state})", *_rss(proc.pid)))
            body = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks"}
            listed = httpx.post(
                url,
                json={**body, "params": {"includeArtifacts": True}},
                headers={"A2A-Version": "1.0"},
                timeout=600,
            )
            rows.append(("after ListTasks", *_rss(proc.pid)))
            flood = _flood(url, 256 * MIB)
            rows.append(("after a 256 MiB body", *_rss(proc.pid)))
        finally:
            proc.terminate()
            proc.wait(30)
    print(f"server: {args.root} {' '.join(server_args)}")
    print(f"{'after':<28}{'RSS MB':>10}{'peak MB':>10}")
    for label, rss, peak in rows:
        print(f"{label:<28}{rss:>10.0f}{peak:>10.0f}")
    result = json.loads(listed.content).get("result", {})
    print(
        f"ListTasks with artifacts: {len(listed.content) / MIB:.1f} MiB, "
        f"{len(result.get('tasks', []))} tasks, next page: {bool(result.get('nextPageToken'))}"
    )
    print(f"256 MiB body: {flood}")
    print(f"({time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
