"""The scripted server's command line: ``python -m app.testing.server --script replies.json``
(the server itself is :class:`app.testing.ScriptedLLMServer`), and :func:`serve`, the loop
every scripted server's command line runs (``python -m app.testing.bedrock_server``)."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from app.testing.replies import Reply, load_script
from app.testing.scripted import ScriptedLLMServer
from app.testing.scripted_base import ScriptedServer

#: Request headers whose values ``--log`` leaves out: a log file is shared more freely than
#: the key the client under test was given.
SECRET_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "api-key", "x-api-key", "cookie"}
)
REDACTED = "***"


class Logged(Protocol):
    """A request as a scripted server captured it (``CapturedRequest``, ``BedrockRequest``)."""

    @property
    def headers(self) -> Mapping[str, str]: ...

    def to_json(self) -> dict[str, Any]: ...


def logged_request(request: Logged) -> dict[str, object]:
    """One ``--log`` line: the request as captured, credential headers replaced by ``***``
    (the scheme of an ``Authorization`` header is kept: ``Bearer ***``)."""
    record = request.to_json()
    headers: dict[str, str] = {}
    for name, value in request.headers.items():
        if name.lower() not in SECRET_HEADERS:
            headers[name] = value
        elif name.lower().endswith("authorization") and " " in value.strip():
            headers[name] = f"{value.strip().split(' ', 1)[0]} {REDACTED}"
        else:
            headers[name] = REDACTED
    record["headers"] = headers
    return record


def main(argv: list[str] | None = None) -> int:
    """Serve a JSON script until SIGTERM/SIGINT (or stdin EOF with ``--stdin-eof``)."""
    parser = argparse.ArgumentParser(
        prog="python -m app.testing.server",
        description="Scripted OpenAI-compatible server; prints its base URL, then serves.",
    )
    parser.add_argument("--script", required=True, help="JSON file holding a list of replies")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0 = any free)")
    parser.add_argument("--model", default="scripted-model", help="model name for /v1/models")
    parser.add_argument(
        "--log",
        help="append every request to this file as JSON lines (credential headers as ***)",
    )
    parser.add_argument(
        "--stdin-eof", action="store_true", help="also stop when standard input reaches end of file"
    )
    args = parser.parse_args(argv)
    return serve(
        "scripted server",
        args.script,
        lambda script, log: ScriptedLLMServer(
            script, port=args.port, model=args.model, on_request=log
        ),
        port=args.port,
        log=args.log,
        stdin_eof=args.stdin_eof,
    )


def serve(
    label: str,
    script_path: str,
    build: Callable[[list[Reply], Callable[[Any], None]], ScriptedServer[Any]],
    *,
    port: int,
    log: str | None = None,
    stdin_eof: bool = False,
) -> int:
    """Serve the JSON script at ``script_path`` from the server ``build`` makes of it and of
    a request logger (appending to ``log``, credentials as ``***``) until SIGTERM/SIGINT, or
    stdin's end with ``stdin_eof``. Prints the server's ``base_url`` first and a summary
    last; 2 when the script cannot be loaded or ``port`` taken."""
    try:
        script = load_script(script_path)
    except (OSError, ValueError, TypeError, KeyError) as exc:
        print(f"{label}: cannot load {script_path}: {exc}", file=sys.stderr)
        return 2

    log_file = open(log, "a", encoding="utf-8") if log else None

    def log_request(request: Logged) -> None:
        if log_file is not None:
            log_file.write(json.dumps(logged_request(request)) + "\n")
            log_file.flush()

    stop = threading.Event()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: stop.set())
    if stdin_eof:

        def watch_stdin() -> None:
            try:
                while sys.stdin.buffer.read(65536):
                    pass
            finally:
                stop.set()

        threading.Thread(target=watch_stdin, name="stdin-eof", daemon=True).start()

    server = build(script, log_request)
    try:
        server.start()
    except OSError as exc:
        print(f"{label}: cannot listen on port {port}: {exc}", file=sys.stderr)
        return 2
    try:
        print(server.base_url, flush=True)
        stop.wait()
    finally:
        server.stop()
        if log_file is not None:
            log_file.close()
    print(
        f"{label}: {len(server.requests)} requests, {server.remaining} replies unused",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
