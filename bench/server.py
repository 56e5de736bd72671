"""The benchmark's model: a scripted server in its own process, answering by the model name.

Running it in a separate process keeps its CPU time and memory out of the figures of the
loop being measured, and lets every loop (ours and the baselines) talk to the same server.
The requested model name says what to answer, so one server serves every scenario:

* ``echo``: one ``echo`` call, forever (the loop stops at its step budget); each call's text
  names the step, so the agent's stuck detection sees progress, as with a real model;
* ``finish-K``: ``echo`` until the request holds K tool results, then ``terminate``;
* ``parallel-N``: N ``wait`` calls in one message until the request holds N tool results,
  then ``terminate``.

Usage: ``python -m bench.server`` prints the base URL, then serves until stdin closes.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from app.testing import ScriptedLLMServer, call, tool_calls
from app.testing.replies import Reply, Usage

__all__ = ["ECHO_TEXT", "main", "respond"]

ECHO_TEXT = "ping"
_USAGE = Usage(10, 5, 15)  # fixed, so the server does no per-request token estimate
_ECHOES: dict[int, Reply] = {}


def _echo(done: int) -> Reply:
    """The ``echo`` call after ``done`` tool results (built once per step number)."""
    reply = _ECHOES.get(done)
    if reply is None:
        reply = _ECHOES[done] = tool_calls(
            call("echo", {"text": f"{ECHO_TEXT} {done}"}), usage=_USAGE
        )
    return reply


_TERMINATE = tool_calls(call("terminate", {"status": "success"}), usage=_USAGE)


def _tool_results(messages: list[Any]) -> int:
    return sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "tool")


def respond(request: Any) -> Reply:
    """The reply for one captured request, chosen by its model name."""
    model = request.model or "echo"
    done = _tool_results(request.messages)
    if model == "echo":
        return _echo(done)
    kind, _, number = model.partition("-")
    count = int(number or 1)
    if kind == "finish":
        return _echo(done) if done < count else _TERMINATE
    if kind == "parallel":
        if done >= count:
            return _TERMINATE
        calls = [call("wait", {"label": f"w{i}"}) for i in range(count)]
        return tool_calls(*calls, usage=_USAGE)
    raise ValueError(f"bench server: unknown scenario model {model!r}")


def main() -> int:
    server = ScriptedLLMServer(responder=respond, keep_requests=16)
    server.start()
    try:
        print(server.base_url, flush=True)
        done = threading.Event()

        def watch_stdin() -> None:
            try:
                while sys.stdin.buffer.read(65536):
                    pass
            finally:
                done.set()

        threading.Thread(target=watch_stdin, name="stdin-eof", daemon=True).start()
        done.wait()
    finally:
        server.stop()
    errors = server.errors
    if errors:
        print(f"bench server: {len(errors)} error(s), first: {errors[0]!r}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
