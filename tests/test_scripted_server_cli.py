"""The scripted server's JSON script format and its command line (a real subprocess)."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path

import openai
import pytest

from app.testing import (
    Reply,
    call,
    drop,
    error,
    load_script,
    raw,
    slow,
    text,
    tool_calls,
)
from tests.test_scripted_server import ask

pytestmark = pytest.mark.e2e

REPO_ROOT = Path(__file__).resolve().parents[1]
USER = [{"role": "user", "content": "hello"}]


# --- replies as JSON ---------------------------------------------------------------------------


def test_replies_round_trip_through_json(tmp_path: Path) -> None:
    replies: list[Reply] = [
        text("hi"),
        text("u", usage={"prompt_tokens": 1, "completion_tokens": 2}, finish_reason="length"),
        text("n", usage=False),
        tool_calls(
            call("a", {"x": 1}),
            call("b", "raw {", id="call_b"),
            call("c", {"y": [1]}, raw_object=True),
            content="c",
            usage=False,
        ),
        error(429, headers={"Retry-After": "0.2"}),
        error(400, "too long", code="context_length_exceeded", type="invalid_request_error"),
        drop(),
        slow(0.5, tool_calls(call("t", {}))),
        raw(200, b"\xff\xfe binary"),
        raw(502, "bad gateway", content_type="text/plain", headers={"X": "y"}),
    ]
    for reply in replies:
        encoded = json.loads(json.dumps(reply.to_json()))
        assert Reply.from_json(encoded) == reply
        assert type(reply).from_json(encoded) == reply
    path = tmp_path / "script.json"
    path.write_text(json.dumps([r.to_json() for r in replies] + ["plain"]))
    assert load_script(path) == [*replies, text("plain")]
    with pytest.raises(ValueError, match="unknown scripted reply type"):
        Reply.from_json({"type": "nope"})
    with pytest.raises(ValueError):
        type(drop()).from_json(text("x").to_json())


def test_reply_factories_reject_nonsense() -> None:
    with pytest.raises(TypeError):
        call("f", 42)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        call("f", "{}", raw_object=True)
    with pytest.raises(ValueError):
        tool_calls()
    with pytest.raises(ValueError):
        error(200)
    with pytest.raises(ValueError):
        slow(-1, text("x"))
    with pytest.raises(TypeError):
        call("f", {"x": object()})  # not JSON-serialisable: fails when scripted, not served
    arguments = call("f", {"a": {"b": 1}})
    arguments.arguments["a"]["b"] = 2  # callers get a copy; the reply stays as scripted
    assert arguments.arguments == {"a": {"b": 1}}


# --- command line ------------------------------------------------------------------------------


async def _start_cli(tmp_path: Path, *extra: str) -> tuple[asyncio.subprocess.Process, str]:
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            [
                text("from the cli").to_json(),
                tool_calls(call("terminate", {"status": "success"})).to_json(),
            ]
        )
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "app.testing.server",
        "--script",
        str(script),
        "--port",
        "0",
        *extra,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=REPO_ROOT,
    )
    try:
        line = await asyncio.wait_for(proc.stdout.readline(), 30)
    except BaseException:
        proc.kill()
        await proc.wait()
        raise
    return proc, line.decode().strip()


async def test_cli_serves_a_json_script_until_sigterm(tmp_path: Path) -> None:
    log = tmp_path / "requests.jsonl"
    proc, base_url = await _start_cli(tmp_path, "--log", str(log))
    try:
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
        api = openai.AsyncOpenAI(base_url=base_url, api_key="cli-key", max_retries=0)
        try:
            first = await ask(api)
            second = await ask(api)
            with pytest.raises(openai.BadRequestError, match="script exhausted after 2"):
                await ask(api)
        finally:
            await api.close()
        assert first.choices[0].message.content == "from the cli"
        assert second.choices[0].message.tool_calls[0].function.name == "terminate"
        proc.send_signal(signal.SIGTERM)
        _, stderr = await asyncio.wait_for(proc.communicate(), 30)
        assert proc.returncode == 0
        assert b"3 requests" in stderr
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    logged = [json.loads(line) for line in log.read_text().splitlines()]
    assert [entry["index"] for entry in logged] == [0, 1, 2]
    # The key the client sent stays out of the log file; the scheme stays readable.
    assert logged[0]["headers"]["authorization"] == "Bearer ***"
    assert "cli-key" not in log.read_text()
    assert logged[0]["body"]["messages"] == USER


async def test_cli_stops_on_stdin_eof(tmp_path: Path) -> None:
    proc, base_url = await _start_cli(tmp_path, "--stdin-eof")
    try:
        assert base_url.startswith("http://127.0.0.1:")
        proc.stdin.close()
        assert await asyncio.wait_for(proc.wait(), 30) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_cli_rejects_a_bad_script(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"type": "mystery"}]))
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "app.testing.server",
        "--script",
        str(bad),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=REPO_ROOT,
    )
    stdout, stderr = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 2
    assert stdout == b""
    assert b"unknown scripted reply type" in stderr
