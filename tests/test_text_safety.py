"""Lone surrogates (``"\\ud800"``) from a model, a tool or a file are made valid UTF-8 where
they enter: the run finishes, its answer prints, its session is written whole (and reads as
finished, so ``--resume`` does not redo it) and the web page's event stream carries every
event (security finding 5)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.llm.arguments import loads_safely, parse_arguments
from app.llm.openai.messages import parse_completion
from app.llm.openai.streaming import StreamAssembler
from app.session import SessionStore
from app.session.writer import SessionWriter
from app.testing import ScriptedLLMServer, call, text, tool_calls
from app.text import REPLACEMENT, clean_text, clean_tree, is_clean
from app.tool.base import ToolResult, format_output
from tests.test_main_e2e import run_main, write_config

LONE = "\ud800"


def encodes(value: object) -> bool:
    """Whether every string in ``value`` (walked like JSON) has a UTF-8 encoding."""
    return is_clean(json.dumps(value, ensure_ascii=False))


# ---- the function ------------------------------------------------------------------------------


def test_clean_text_keeps_valid_text_as_is_and_replaces_lone_surrogates() -> None:
    valid = "plain é 中文 😀"
    assert clean_text(valid) is valid  # the fast path: the very same object
    assert clean_text("a\ud800b\udfffc") == f"a{REPLACEMENT}b{REPLACEMENT}c"
    assert clean_text("x\udcff") == f"x{REPLACEMENT}"  # a surrogateescape'd byte
    assert clean_text("\ud83d\ude00") == "😀"  # a pair split in two code points is joined
    assert clean_text("\ude00\ud83d") == REPLACEMENT * 2  # the wrong order is no pair


def test_clean_tree_walks_keys_values_and_deep_nesting() -> None:
    deep: list[object] = [LONE]
    for _ in range(100_000):  # deeper than any recursion limit
        deep = [deep]
    tree = {"a" + LONE: ["ok", {"b": LONE}], "deep": deep}
    assert clean_tree(tree) is tree
    assert set(tree) == {"a" + REPLACEMENT, "deep"}
    assert tree["a" + REPLACEMENT] == ["ok", {"b": REPLACEMENT}]
    inner = tree["deep"]
    while isinstance(inner, list) and isinstance(inner[0], list):
        inner = inner[0]
    assert inner == [REPLACEMENT]
    assert clean_tree(LONE) == REPLACEMENT and clean_tree(5) == 5


# ---- where model text enters -------------------------------------------------------------------


def test_decoded_json_and_arguments_are_valid_text() -> None:
    assert loads_safely('{"a": "x\\ud800y"}') == {"a": f"x{REPLACEMENT}y"}
    assert loads_safely('"\\ud83d\\ude00"') == "😀"  # a real pair stays the character
    assert parse_arguments('{"path": "f\\udfff.txt"}') == {"path": f"f{REPLACEMENT}.txt"}


def test_a_reply_decoded_by_any_transport_is_valid_text() -> None:
    """What the openai SDK decodes (its own json.loads) reaches ``parse_completion`` with
    lone surrogates in it: every text of the message comes out valid."""
    reply = {
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "content": f"answer {LONE}",
                    "reasoning_content": f"thinking {LONE}",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": f"tool{LONE}", "arguments": {"t": LONE}},
                        },
                        {"id": "c2", "function": {"name": "t", "arguments": f'{{"t": "{LONE}"}}'}},
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ]
    }
    completion = parse_completion(reply, "m")
    message = completion.message
    assert message.content == f"answer {REPLACEMENT}"
    assert completion.reasoning == f"thinking {REPLACEMENT}"
    assert message.tool_calls is not None
    assert message.tool_calls[0].function.name == f"tool{REPLACEMENT}"
    assert json.loads(message.tool_calls[0].function.arguments) == {"t": REPLACEMENT}
    assert json.loads(message.tool_calls[1].function.arguments) == {"t": REPLACEMENT}
    assert encodes(message.model_dump())


def test_streamed_pieces_are_valid_text_and_a_split_pair_is_joined() -> None:
    assembler = StreamAssembler("m")

    def chunk(content: str) -> dict[str, object]:
        return {"choices": [{"index": 0, "delta": {"content": content}}]}

    shown = [assembler.add(chunk("a\ud83d")), assembler.add(chunk("\ude00 " + LONE))]
    assembler.add({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    assert all(piece is not None and is_clean(piece) for piece in shown)  # sent on at once
    message = parse_completion(assembler.completion(), "m").message
    assert message.content == f"a😀 {REPLACEMENT}"


def test_tool_output_is_valid_text() -> None:
    assert format_output(f"out {LONE}") == f"out {REPLACEMENT}"
    assert format_output(ToolResult(error="bad \udcff")) == f"Error: bad {REPLACEMENT}"
    assert format_output({"k": LONE}) == f'{{"k": "{REPLACEMENT}"}}'


def test_the_session_writer_never_fails_on_a_lone_surrogate(tmp_path: Path) -> None:
    writer = SessionWriter(tmp_path / "s" / "x.jsonl")
    writer.add({"type": "session", "id": "x", "kind": "agent"})
    writer.add({"type": "task", "prompt": f"p {LONE}"})
    writer.close()
    assert writer.error is None
    raw = (tmp_path / "s" / "x.jsonl").read_bytes()
    raw.decode("utf-8")  # the file is valid UTF-8
    data = SessionStore(tmp_path / "s").load("x")
    assert data.tasks == [f"p {REPLACEMENT}"] and data.problems == []


# ---- main.py, end to end -----------------------------------------------------------------------


def main_py(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_main(tmp_path, *args, timeout=120)


def run_and_resume(
    tmp_path: Path, server: ScriptedLLMServer, **config: object
) -> tuple[subprocess.CompletedProcess[str], str]:
    """main.py runs one task, then ``--list-sessions`` and ``--resume`` of its session;
    returns the run and the session's listing line."""
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    cfg = write_config(tmp_path, server.base_url, **config)
    common = ("-c", str(cfg), "-w", str(workspace))
    run = main_py(tmp_path, "-p", "do it", *common)
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr and "Logging error" not in run.stderr
    listing = main_py(tmp_path, "--list-sessions", *common)
    assert listing.returncode == 0, listing.stderr
    [line] = listing.stdout.splitlines()
    assert "  finished  " in line, line  # not "incomplete": the recorder wrote every record
    session_id = line.split()[0]
    session_file = workspace / ".sessions" / f"{session_id}.jsonl"
    session_file.read_bytes().decode("utf-8")  # valid UTF-8 throughout
    asked = len(server.requests)
    resumed = main_py(tmp_path, "--resume", session_id, *common)
    assert resumed.returncode == 0, resumed.stderr
    assert f"Resumed session {session_id} (finished" in resumed.stderr
    assert "Traceback" not in resumed.stderr and "Carrying on" not in resumed.stderr
    assert len(server.requests) == asked  # the finished task is not run again
    return run, line


@pytest.mark.e2e
def test_main_py_with_a_lone_surrogate_in_the_answer(tmp_path: Path) -> None:
    with ScriptedLLMServer() as server:
        server.push(text(f"the answer {LONE} is here"))
        run, _ = run_and_resume(tmp_path, server)
    assert run.stdout.strip() == f"the answer {REPLACEMENT} is here"


@pytest.mark.e2e
def test_main_py_with_lone_surrogates_in_tool_arguments(tmp_path: Path) -> None:
    with ScriptedLLMServer() as server:
        server.push(
            tool_calls(
                call(
                    "str_replace_editor",
                    {"command": "create", "path": f"f{LONE}.txt", "file_text": f"a{LONE}b\n"},
                ),
                content=f"creating {LONE}",
            ),
            tool_calls(call("str_replace_editor", {"command": "view", "path": f"f{LONE}.txt"})),
            tool_calls(call("terminate", {"status": "success"}), content=f"done {LONE}"),
        )
        run, _ = run_and_resume(tmp_path, server)
        tool_outputs = [
            m["content"] for m in server.requests[2].body["messages"] if m["role"] == "tool"
        ]
    created = tmp_path / "ws" / f"f{REPLACEMENT}.txt"
    assert created.read_text(encoding="utf-8") == f"a{REPLACEMENT}b\n"
    assert f"a{REPLACEMENT}b" in tool_outputs[-1]  # the model read back what was written
    assert run.stdout.strip() == f"done {REPLACEMENT}"


@pytest.mark.e2e
def test_main_py_with_a_lone_surrogate_in_a_streamed_reply(tmp_path: Path) -> None:
    with ScriptedLLMServer() as server:
        server.push(
            tool_calls(
                call(
                    "str_replace_editor", {"command": "create", "path": "s.txt", "file_text": LONE}
                ),
                content=f"streaming {LONE}",
            ),
            text(f"streamed {LONE} answer"),
        )
        run, _ = run_and_resume(tmp_path, server, stream="true")
        assert all(request.body.get("stream") is True for request in server.requests)
    assert run.stdout.strip() == f"streamed {REPLACEMENT} answer"
    assert f"streaming {REPLACEMENT}" in run.stderr  # the live view got the repaired text
    assert (tmp_path / "ws" / "s.txt").read_text(encoding="utf-8") == REPLACEMENT


@pytest.mark.e2e
def test_main_py_shows_a_file_with_invalid_utf8_bytes(tmp_path: Path) -> None:
    """The editor keeps a file's undecodable bytes (``surrogateescape``) for its own edits;
    what the model, the session and the terminal get is valid text."""
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "latin.txt").write_bytes(b"caf\xe9 au lait\n")
    with ScriptedLLMServer() as server:
        server.push(
            tool_calls(call("str_replace_editor", {"command": "view", "path": "latin.txt"})),
            tool_calls(
                call(
                    "str_replace_editor",
                    {
                        "command": "str_replace",
                        "path": "latin.txt",
                        "old_str": "au lait",
                        "new_str": "noir",
                    },
                )
            ),
            text("viewed"),
        )
        run_and_resume(tmp_path, server)
        shown = [m["content"] for m in server.requests[1].body["messages"] if m["role"] == "tool"]
    assert f"caf{REPLACEMENT} au lait" in shown[-1]
    assert (tmp_path / "ws" / "latin.txt").read_bytes() == b"caf\xe9 noir\n"  # byte kept


# ---- the web UI ----------------------------------------------------------------------------------


@pytest.fixture
def web(tmp_path: Path) -> Iterator[tuple[object, ScriptedLLMServer]]:
    from tests.web_ui_helpers import WebApp

    with ScriptedLLMServer() as server:
        app = WebApp(tmp_path, server.base_url).start()
        try:
            yield app, server
        finally:
            app.stop()


@pytest.mark.e2e
def test_the_web_event_stream_carries_every_event(web: tuple[object, ScriptedLLMServer]) -> None:
    from tests.web_ui_helpers import WebApp, sse_entries

    app, server = web
    assert isinstance(app, WebApp)
    server.push(
        tool_calls(
            call("str_replace_editor", {"command": "create", "path": "w.txt", "file_text": LONE}),
            content=f"thinking {LONE}",
        ),
        tool_calls(call("bash", {"command": "printf 'raw \\377 byte'"})),
        text(f"web answer {LONE}"),
    )
    with app.client() as client:
        sid = app.new_session(client, "go")
        app.wait_idle(client, sid)
        for _ in range(2):  # a reconnect replays the whole log again
            with client.stream("GET", f"/api/sessions/{sid}/events") as stream:
                entries = list(sse_entries(stream))
            ids = [i for i, _ in entries]
            assert ids == list(range(1, len(ids) + 1))  # every event, none cut off
            finished = entries[-1][1]
            assert finished["kind"] == "task_finished"
            assert finished["final_answer"] == f"web answer {REPLACEMENT}"
            assert any(e.get("text") == f"thinking {REPLACEMENT}" for _, e in entries)
            assert encodes([e for _, e in entries])
    assert not any("Traceback" in line for line in app.stderr), "".join(app.stderr)
