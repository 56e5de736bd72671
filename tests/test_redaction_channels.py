"""One redactor for every outward channel (docs/sessions-and-events.md#what-leaves-the-process):
a hostile model that knows the API key echoes it in its text (streamed, split in two), its
tool calls' arguments, ids and names, and its finish reason, raw and encoded; the key must
not come out of main.py's stdout and stderr, its session file, log file and trace export,
nor of the web UI's event stream and AG-UI's stream (over HTTP, from ``python -m app.web``).

The streamed pieces of a text are checked joined, as a page or a terminal shows them: a key
split across two pieces is a leak even though no single piece holds it.
"""

from __future__ import annotations

import base64
import itertools
import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.events import RunFinished, TextDelta, Thought, ToolCallEvent, ToolResultEvent
from app.logger import register_secret
from app.redaction import EventRedactor, StreamRedactor, redact_event, redact_text
from app.testing import ScriptedLLMServer, call, error, text, tool_calls
from tests.hostile_model import (
    KEY,
    PROMPT_WORDS,
    encoded,
    final_turn,
    hostile_config,
    hostile_turn,
    leaks,
)
from tests.otlp_receiver import OtlpReceiver
from tests.test_main_e2e import child_env
from tests.test_tracing import run_program

PROMPT = f"Summarise the {PROMPT_WORDS}; my key is {KEY}"


@pytest.fixture(autouse=True)
def _key_registered() -> None:
    register_secret(KEY)  # as the LLM does for its api_key (the programs do it themselves)


# ---- streamed text ----------------------------------------------------------------------------


def streamed(pieces: list[str]) -> str:
    stream = StreamRedactor()
    return "".join(stream.feed(p) for p in pieces) + stream.flush()


def splits(text: str, rng: random.Random, most: int = 12) -> list[str]:
    cuts = sorted(rng.sample(range(1, len(text)), min(len(text) - 1, rng.randint(1, most))))
    return [text[a:b] for a, b in itertools.pairwise([0, *cuts, len(text)])]


TEXTS = [
    f"before {KEY} after",
    KEY,
    f"the key: {encoded()} end",
    "api_key = hunter2hunter2 and Bearer abcdefghijk then https://user:pw123456@host/x",
    "a token sk-abcdefghijklmnopqrstuvwxyz, and more",
    f'"api_key": "{KEY}"',
    "x" * 9000 + base64.b64encode(b"yy" + KEY.encode()).decode() + "z" * 9000 + " tail",
]


@pytest.mark.parametrize("text", TEXTS, ids=range(len(TEXTS)))
def test_a_stream_is_redacted_as_if_it_came_whole(text: str) -> None:
    """Every way of cutting the text into pieces gives what redacting it whole gives."""
    whole = redact_text(text)
    if len(text) < 200:
        for cut in range(1, len(text)):  # every split in two
            assert streamed([text[:cut], text[cut:]]) == whole, cut
        assert streamed(list(text)) == whole  # one character at a time
    rng = random.Random(34)
    for _ in range(100):
        assert streamed(splits(text, rng)) == whole


def test_a_stream_holds_back_only_what_could_still_become_a_secret() -> None:
    stream = StreamRedactor()
    assert stream.feed("Hello there, ") == "Hello there, "  # plain words go out at once
    assert stream.feed("the key is hostile-Key/") == "the key is "  # a word being written waits
    assert stream.feed('x+"q"') == ""
    assert stream.feed(KEY[len('hostile-Key/x+"q"') :] + " and Bearer ") == "*** and "
    assert stream.feed("abcdefgh rest ") == "Bearer *** rest "
    assert stream.feed("tail") == "" and stream.flush() == "tail"


def test_a_secret_with_spaces_is_caught_across_pieces() -> None:
    register_secret("correct horse battery staple")
    text = "my passphrase is correct horse battery staple, really"
    for cut in range(1, len(text)):
        assert streamed([text[:cut], text[cut:]]) == "my passphrase is ***, really"


def test_events_are_redacted_and_streams_joined_per_source_and_step() -> None:
    redactor = EventRedactor(TextDelta)
    half = len(KEY) // 2
    out = redactor(TextDelta("a", step=1, text=f"see {KEY[:half]}"))
    out += redactor(TextDelta("b", step=1, text="other agent "))  # another source: separate
    out += redactor(TextDelta("a", step=1, text=KEY[half:]))
    out += redactor(Thought("a", step=1, text=f"see {KEY}"))  # ends a's stream first
    out += redactor(ToolCallEvent("a", step=1, call_id=KEY, name=KEY, arguments=json.dumps(KEY)))
    out += redactor(ToolResultEvent("a", step=1, call_id=KEY, output=KEY, image="aW1n"))
    assert [type(e).__name__ for e in out] == [
        "TextDelta", "TextDelta", "TextDelta", "Thought", "ToolCallEvent", "ToolResultEvent",
    ]  # fmt: skip
    a_text = "".join(e.text for e in out if isinstance(e, TextDelta) and e.source == "a")
    assert a_text == "see ***"
    assert out[3] == Thought("a", step=1, text="see ***")
    assert (out[4].call_id, out[4].name, out[4].arguments) == ("***", "***", '"***"')
    assert out[5].output == "***" and out[5].image == "aW1n"  # transient: never rendered
    assert leaks(repr(out)) == []
    plain = ToolCallEvent("a", call_id="c1", name="bash", arguments="{}")
    assert redact_event(plain) is plain  # nothing to change: the same object
    finished = RunFinished("a", final_answer=KEY, failure=f"api_key={KEY}")
    assert redact_event(finished) == RunFinished("a", final_answer="***", failure="api_key=***")


# ---- the programs -----------------------------------------------------------------------------


def joined_text(entries: list[dict[str, Any]]) -> str:
    """The streamed text of web log entries, joined per source and step (as the page does)."""
    texts: dict[tuple[Any, Any, Any], str] = {}
    for entry in entries:
        if entry.get("kind") == "text_delta":
            key = (entry.get("run"), entry.get("source"), entry.get("step"))
            texts[key] = texts.get(key, "") + entry.get("text", "")
    return "\n".join(texts.values())


@pytest.mark.e2e
def test_main_py_keeps_the_key_out_of_every_channel(tmp_path: Path) -> None:
    with ScriptedLLMServer() as server, OtlpReceiver() as receiver:
        server.push(hostile_turn(), final_turn())
        tracing = f'[tracing]\nendpoint = "{receiver.url}"\nrecord_content = true\n'
        config = hostile_config(tmp_path, server.base_url, tracing)
        workspace = tmp_path / "ws"
        workspace.mkdir()
        prompt = f"password=hunter2hunter2 {PROMPT}"
        args = ("-c", str(config), "-w", str(workspace), "-p", prompt, "--trace", "--verbose")
        out, _ = run_program(tmp_path, *args)
        assert out.returncode == 0, out.stderr
        assert server.remaining == 0
        # The model really got the key as its API key, and really asked for the tools.
        chat = next(r for r in server.requests if r.route == "chat")
        assert {k.lower(): v for k, v in chat.headers.items()}["authorization"] == f"Bearer {KEY}"
        spans = receiver.wait_for(lambda s: any(x.name.startswith("invoke_agent") for x in s))
        body = b"".join(receiver.bodies)

    assert "The key is ***" in out.stdout  # the final answer, redacted
    assert "Unknown tool '***'" in out.stderr  # the tool named after the key was shown
    assert leaks(out.stdout) == [] and leaks(out.stderr) == []
    (session,) = (workspace / ".sessions").glob("*.jsonl")
    assert '"call_id":"***"' in session.read_text()
    assert leaks(session.read_text()) == []
    # The session keeps credential-shaped text for the model (resume); its listing does not.
    assert "password=hunter2hunter2" in session.read_text()
    listing, _ = run_program(tmp_path, "-c", str(config), "-w", str(workspace), "--list-sessions")
    assert listing.returncode == 0, listing.stderr
    assert "password=*** Summarise" in listing.stdout and "hunter2" not in listing.stdout
    logs = list((tmp_path / "logs").glob("*.log"))
    assert logs and all(leaks(log.read_text()) == [] for log in logs)
    assert len(spans) >= 6 and leaks(body) == []


@pytest.mark.e2e
def test_run_flow_py_keeps_the_key_out_of_its_plan_steps_and_summary(tmp_path: Path) -> None:
    """The planner's plan (title and steps), the agent's turns and the summary all carry the
    key: the plan lines, step lines and the summary on stdout are redacted."""
    plan = {"command": "create", "plan_id": "p", "title": f"Plan {KEY}", "steps": [f"use {KEY}"]}
    with ScriptedLLMServer() as server:
        server.push(
            tool_calls(call("planning", plan), content=KEY),
            hostile_turn(),
            final_turn(),
            text(f"Summary: the key was {KEY} ({encoded()})"),
        )
        config = hostile_config(tmp_path, server.base_url)
        workspace = tmp_path / "ws"
        workspace.mkdir()
        args = ("-c", str(config), "-w", str(workspace), "-p", PROMPT)
        out, _ = run_program(tmp_path, *args, program="run_flow.py")
        assert out.returncode == 0, out.stderr
        assert server.remaining == 0
    assert "Summary: the key was ***" in out.stdout
    assert "Plan ***" in out.stderr and "use ***" in out.stderr  # the plan was shown
    assert leaks(out.stdout) == [] and leaks(out.stderr) == []
    (session,) = (workspace / ".sessions").glob("*.jsonl")
    assert leaks(session.read_text()) == []


def read_sse(response: Any, until: set[str], field: str) -> tuple[str, list[dict[str, Any]]]:
    """The raw text of an SSE stream and its ``data:`` items, up to the first item whose
    ``field`` is in ``until``."""
    raw, items = [], []
    for line in response.iter_lines():
        raw.append(line)
        if line.startswith("data: "):
            items.append(json.loads(line[6:]))
            if items[-1].get(field) in until:
                break
    return "\n".join(raw), items


@pytest.mark.e2e
def test_the_web_ui_and_agui_keep_the_key_out(tmp_path: Path) -> None:
    from tests.test_agui import run_input, validate
    from tests.web_ui_helpers import WebApp

    with ScriptedLLMServer() as server:
        web = WebApp(tmp_path, server.base_url)
        hostile_config(tmp_path, server.base_url)  # the same file, with the key as api_key
        web.start()
        try:
            with web.client() as client:
                server.push(hostile_turn(), final_turn())
                sid = web.new_session(client, PROMPT)
                with client.stream("GET", f"/api/sessions/{sid}/events") as response:
                    page_raw, entries = read_sse(response, {"task_finished"}, "kind")
                finished = entries[-1]
                assert finished["kind"] == "task_finished" and finished["ok"], finished
                listing = client.get("/api/sessions").text

                server.push(hostile_turn(), final_turn())
                with client.stream("POST", "/api/agui", json=run_input(PROMPT)) as response:
                    assert response.status_code == 200
                    agui_raw, events = read_sse(response, {"RUN_FINISHED", "RUN_ERROR"}, "type")
                assert server.remaining == 0
        finally:
            web.stop()
        web_stderr = "".join(web.stderr)

    kinds = [e["kind"] for e in entries]
    assert "text_delta" in kinds and "tool_call" in kinds  # the model streamed and called
    assert "The key is ***" in finished["final_answer"]
    assert {e["call_id"] for e in entries if e["kind"] == "tool_call"} == {
        "named", "***", "c-***", "end-***",
    }  # fmt: skip
    assert leaks(page_raw) == [] and leaks(json.dumps(entries)) == []
    assert leaks(joined_text(entries)) == [] and "***" in joined_text(entries)
    assert leaks(listing) == []

    types = validate(events)  # still the protocol, every event
    assert types[-1] == "RUN_FINISHED"
    messages: dict[str, str] = {}
    for event in events:
        if event["type"] in ("TEXT_MESSAGE_CONTENT", "TOOL_CALL_ARGS"):
            ident = event.get("messageId") or event.get("toolCallId")
            messages[ident] = messages.get(ident, "") + event["delta"]
    assert leaks(agui_raw) == [] and leaks("\n".join(messages.values())) == []
    assert "***" in "".join(messages.values())

    stored = list((web.workspace / "web" / ".sessions").glob("*.jsonl"))
    assert stored and all(leaks(path.read_text()) == [] for path in stored)
    assert leaks(web_stderr) == []


@pytest.mark.e2e
def test_a_batch_keeps_the_key_out_of_its_results(tmp_path: Path) -> None:
    """``python -m app.batch``: the answers and errors in results.jsonl, its summary and the
    tasks' session files hold no form of the key; the rest of the answer is kept as written."""
    tasks = tmp_path / "tasks.jsonl"
    lines = [{"id": "echo", "prompt": PROMPT}, {"id": "refused", "prompt": f"again {PROMPT}"}]
    tasks.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "results.jsonl"
    with ScriptedLLMServer(responder=_batch_replies) as server:
        config = hostile_config(tmp_path, server.base_url)
        args = (str(tasks), "-o", str(out), "-c", str(config), "-j", "1", "--no-progress")
        done = subprocess.run(
            [sys.executable, "-m", "app.batch", *args],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env=child_env(tmp_path),
            cwd=tmp_path,
            timeout=120,
        )
    results = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert set(results) == {"echo", "refused"}, done.stderr
    assert "The key is ***" in results["echo"]["final_answer"], results
    assert results["refused"]["error"], results
    written = [p for p in tmp_path.glob("results*/**/*") if p.is_file()]
    written += [p for p in tmp_path.glob("results*") if p.is_file()]
    assert len(written) >= 2
    for path in written:  # the results, their summary, each task's workspace and session
        assert not leaks(path.read_bytes()), path
    assert not leaks(done.stdout + done.stderr)


def _batch_replies(request: Any) -> Any:
    prompt = json.dumps(request.body["messages"])
    if "again" in prompt:
        return error(400, f"invalid request: the prompt was {PROMPT}")
    return final_turn()
