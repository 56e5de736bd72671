"""``/api/agui`` (the AG-UI protocol) over real HTTP against the scripted model: every event
checked against the protocol's own models (``ag-ui-protocol``), front-end tools paused and
continued, ``context``/``state`` reaching the model, flow mode, abort, 409 and 413.

The official TypeScript client (``@ag-ui/client``) drives the same server in
tests/test_agui_client.py (Node) and tests/test_agui_browser.py (Chromium)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from app.testing import ScriptedLLMServer, call, stall, text, tool_calls
from tests.test_run_flow_e2e import plan_call
from tests.web_ui_helpers import WebApp, wait_until

httpx = pytest.importorskip("httpx")  # the browser and search extras install it

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory, llm: ScriptedLLMServer) -> Iterator[WebApp]:
    web = WebApp(tmp_path_factory.mktemp("agui"), llm.base_url).start()
    yield web
    web.stop()


@pytest.fixture
def client(app: WebApp, llm: ScriptedLLMServer) -> Iterator[httpx.Client]:
    assert llm.remaining == 0, "a previous test left replies unused"
    with app.client() as c:
        yield c


def agui_events(client: httpx.Client, body: dict) -> list[dict]:
    events = []
    with client.stream("POST", "/api/agui", json=body) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line[6:]))
    return events


def run_input(
    prompt: str, thread: str = "thread-1", history: list[dict] | None = None, **extra: object
) -> dict:
    messages = [
        *(history or []),
        {"id": f"u-{time.monotonic_ns()}", "role": "user", "content": prompt},
    ]
    return {
        "threadId": thread,
        "runId": f"run-{time.monotonic_ns()}",
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
        **extra,
        "messages": messages,
    }


def validate(events: list[dict]) -> list[str]:
    import ag_ui.core as agui  # the protocol's own event models (the dev extra installs them)
    from pydantic import TypeAdapter

    adapter = TypeAdapter(agui.Event)
    for event in events:
        adapter.validate_python(event)  # raises on anything off the protocol's schema
    return [e["type"] for e in events]


def assert_error(response: httpx.Response, status: int, words: str = "") -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert isinstance(body["error"], str) and body["error"]
    assert words.lower() in body["error"].lower(), body["error"]
    return body


def session_of(client: httpx.Client, title: str) -> dict[str, Any]:
    return next(s for s in client.get("/api/sessions").json()["sessions"] if s["title"] == title)


def test_agui_stream_follows_the_protocol(client, llm) -> None:
    llm.push(
        tool_calls(call("bash", {"command": "echo agui"}), content="Running it."),
        text("All done via AG-UI."),
    )
    body = run_input("say hi")
    events = agui_events(client, body)
    types = validate(events)
    assert types[0] == "RUN_STARTED" and types[-1] == "RUN_FINISHED"
    assert events[0]["threadId"] == "thread-1" and events[-1]["result"] == "All done via AG-UI."
    for kind in (
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
        "STEP_STARTED",
        "STEP_FINISHED",
    ):
        assert kind in types, kind
    assert (
        types.index("TOOL_CALL_START")
        < types.index("TOOL_CALL_END")
        < types.index("TOOL_CALL_RESULT")
    )
    # Text and call of one model turn are one assistant message on the client.
    first_text = next(e for e in events if e["type"] == "TEXT_MESSAGE_START")["messageId"]
    start = next(e for e in events if e["type"] == "TOOL_CALL_START")
    assert start["parentMessageId"] == first_text
    result = next(e for e in events if e["type"] == "TOOL_CALL_RESULT")
    assert "agui" in result["content"]
    text_out = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert "Running it." in text_out and "All done via AG-UI." in text_out
    starts = [e["stepName"] for e in events if e["type"] == "STEP_STARTED"]
    ends = [e["stepName"] for e in events if e["type"] == "STEP_FINISHED"]
    assert sorted(starts) == sorted(ends)
    # The same thread continues the same conversation; the history it sends (as the
    # client built it from the events) is known, so only the new message runs.
    history = [*body["messages"], {"id": first_text, "role": "assistant", "content": "x"}]
    llm.push(text("Second run."))
    second = agui_events(client, run_input("again", history=history))
    assert validate(second)[-1] == "RUN_FINISHED"
    sent = str(llm.requests[-1].messages)
    assert "say hi" in sent and sent.count("again") == 1 and sent.count("say hi") == 1


def test_agui_client_tools_pause_and_continue_with_context_and_state(client, llm) -> None:
    picker = {
        "name": "pick_color",
        "description": "Ask the user to pick a colour in the app.",
        "parameters": {
            "type": "object",
            "properties": {"choices": {"type": "array", "items": {"type": "string"}}},
            "required": ["choices"],
        },
    }
    context = [{"description": "The page the user is on", "value": "checkout"}]
    state = {"cart": ["socks"]}
    llm.push(
        tool_calls(call("pick_color", {"choices": ["red", "blue"]}), content="Let me ask."),
        text("You picked blue: ordering blue socks."),
    )
    first = run_input(
        "order socks", thread="tools-thread", tools=[picker], context=context, state=state
    )
    events = agui_events(client, first)
    types = validate(events)
    assert types[-1] == "RUN_FINISHED" and "TOOL_CALL_RESULT" not in types
    start = next(e for e in events if e["type"] == "TOOL_CALL_START")
    assert start["toolCallName"] == "pick_color"
    assert start["parentMessageId"] == next(
        e["messageId"] for e in events if e["type"] == "TEXT_MESSAGE_START"
    )
    assert events[-1]["outcome"] == {"type": "success", "pendingToolCallIds": [start["toolCallId"]]}
    request = llm.requests[-1]
    offered = [t["function"]["name"] for t in request.tools or []]
    assert "pick_color" in offered and "bash" in offered
    sent = json.dumps(request.messages)
    assert "checkout" in sent and "socks" in sent and "The page the user is on" in sent
    assert session_of(client, "order socks")["running"]  # paused, waiting for the client

    # The client runs the tool and posts its result: the paused agent continues with it.
    history = [
        *first["messages"],
        {
            "id": start["parentMessageId"],
            "role": "assistant",
            "content": "Let me ask.",
            "toolCalls": [
                {
                    "id": start["toolCallId"],
                    "type": "function",
                    "function": {"name": "pick_color", "arguments": "{}"},
                }
            ],
        },
        {"id": "tool-1", "role": "tool", "toolCallId": start["toolCallId"], "content": "blue"},
    ]
    second = {**first, "runId": "run-continue", "messages": history}
    events = agui_events(client, second)
    assert validate(events)[-1] == "RUN_FINISHED"
    assert events[-1]["result"] == "You picked blue: ordering blue socks."
    messages = llm.requests[-1].messages
    answer = next(m for m in messages if m.get("role") == "tool")
    assert answer["content"].endswith("blue") and answer["tool_call_id"] == start["toolCallId"]
    assert json.dumps(messages).count("order socks") == 1  # not re-run
    assert json.dumps(messages).count("The page the user is on") == 1  # unchanged: not re-sent
    assert "TOOL_CALL_RESULT" not in [e["type"] for e in events]  # the client holds it
    # A result nobody waits for is refused plainly.
    stale = {
        **second,
        "runId": "run-stale",
        "messages": [*history[:-1], {**history[-1], "id": "t2"}],
    }
    assert_error(client.post("/api/agui", json=stale), 422, "waiting")
    # A tool that clashes with ours is refused.
    clash = run_input("x", thread="clash", tools=[{**picker, "name": "bash"}])
    assert_error(client.post("/api/agui", json=clash), 422, "clash")


def test_agui_new_prompt_abandons_a_paused_tool_call(client, llm) -> None:
    picker = {"name": "confirm", "description": "Ask the user to confirm.", "parameters": {}}
    llm.push(tool_calls(call("confirm", {})), text("Fine, something else."))
    first = run_input("buy it", thread="abandon", tools=[picker])
    assert validate(agui_events(client, first))[-1] == "RUN_FINISHED"
    events = agui_events(
        client, run_input("never mind", thread="abandon", history=first["messages"])
    )
    assert events[-1]["type"] == "RUN_FINISHED" and events[-1]["result"] == "Fine, something else."


def test_agui_a_front_end_call_with_bad_arguments_gets_its_error_and_is_not_pending(
    client, llm
) -> None:
    pick = {
        "name": "pick",
        "description": "Pick one.",
        "parameters": {
            "type": "object",
            "properties": {"choices": {"type": "array"}},
            "required": ["choices"],
        },
    }
    llm.push(tool_calls(call("pick", {}), call("pick", {"choices": ["a", "b"]})))
    events = agui_events(client, run_input("pick one", thread="bad-args", tools=[pick]))
    validate(events)
    bad, good = [e["toolCallId"] for e in events if e["type"] == "TOOL_CALL_START"]
    error = next(e for e in events if e["type"] == "TOOL_CALL_RESULT")
    assert error["toolCallId"] == bad and "choices" in error["content"]
    assert events[-1]["outcome"]["pendingToolCallIds"] == [good]


def test_agui_flow_summary_and_planner_calls(client, llm) -> None:
    llm.push(
        plan_call("[MANUS] One", "[MANUS] Two"),
        tool_calls(call("terminate", {"status": "success"}), content="one done"),
        tool_calls(call("terminate", {"status": "success"}), content="two done"),
        text("Flow summary."),
    )
    before = len(llm.requests)
    flow = {"mode": "flow"}
    team = [{"description": "Team", "value": "sales"}]
    events = agui_events(
        client, run_input("plan it", thread="flow-thread", forwardedProps=flow, context=team)
    )
    assert "Team: sales" in json.dumps(llm.requests[before].messages)  # the planner's request
    types = validate(events)
    assert "STATE_SNAPSHOT" in types and "STATE_DELTA" in types
    snapshot = next(e for e in events if e["type"] == "STATE_SNAPSHOT")["snapshot"]
    assert snapshot["plan"]["steps"] == ["[MANUS] One", "[MANUS] Two"]
    paths = [op["path"] for e in events if e["type"] == "STATE_DELTA" for op in e["delta"]]
    assert "/plan/step_statuses/1" in paths
    assert types[-1] == "RUN_FINISHED" and events[-1]["result"] == "Flow summary."
    # The planner's call is a tool call like any other, and the summary a text message.
    plan_start = next(e for e in events if e["type"] == "TOOL_CALL_START")
    assert plan_start["toolCallName"] == "planning"
    args = json.loads(
        next(
            e["delta"]
            for e in events
            if e["type"] == "TOOL_CALL_ARGS" and e["toolCallId"] == plan_start["toolCallId"]
        )
    )
    assert args["command"] == "create" and args["steps"] == ["[MANUS] One", "[MANUS] Two"]
    texts = {}
    for e in events:
        if e["type"] == "TEXT_MESSAGE_CONTENT":
            texts[e["messageId"]] = texts.get(e["messageId"], "") + e["delta"]
    assert list(texts.values())[-1] == "Flow summary."


def test_agui_new_thread_takes_earlier_messages_as_history(client, llm) -> None:
    llm.push(text("You are Ada."))
    history = [
        {"id": "h1", "role": "user", "content": "My name is Ada."},
        {"id": "h2", "role": "assistant", "content": "Hello Ada."},
    ]
    events = agui_events(client, run_input("What is my name?", thread="ada", history=history))
    assert events[-1]["result"] == "You are Ada."
    roles = [(m["role"], m["content"]) for m in llm.requests[-1].messages if m["role"] != "system"]
    assert ("user", "My name is Ada.") in roles and ("assistant", "Hello Ada.") in roles
    assert roles.index(("user", "My name is Ada.")) < roles.index(("assistant", "Hello Ada."))


def test_agui_errors(client, llm) -> None:
    # A run that fails (the scripted model runs out of replies) ends in RUN_ERROR.
    llm.push(tool_calls(call("bash", {"command": "echo 1"})))
    failed = agui_events(client, run_input("loop", thread="fail-thread"))
    assert validate(failed)[-1] == "RUN_ERROR"
    assert failed[-1]["message"]
    for bad in [
        {},
        {"threadId": "t", "runId": "r", "messages": []},
        [1],
        {"threadId": "t", "runId": "r", "messages": [{"role": "user", "content": ""}]},
        run_input("x", forwardedProps={"mode": "robot"}),
        run_input("x", tools=[{"name": "no spaces allowed"}]),
        run_input("x", tools=[{"name": "t", "parameters": {"type": "object", "properties": 5}}]),
        run_input("x", context="not a list"),
    ]:
        assert_error(client.post("/api/agui", json=bad), 422 if isinstance(bad, dict) else 400)


def test_a_long_thread_is_not_re_read_and_the_body_cap_is_32_mib(client, llm) -> None:
    llm.push(text("First answer."), text("Second answer."))
    first = run_input("long thread", thread="long")
    events = agui_events(client, first)
    answer_id = next(e["messageId"] for e in events if e["type"] == "TEXT_MESSAGE_START")
    # The client resends the thread; a message the server streamed itself is matched by id and
    # not read again, however large (over the 1 MiB of the other endpoints).
    held = {"id": answer_id, "role": "assistant", "content": "x" * (2 << 20)}
    events = agui_events(
        client, run_input("next", thread="long", history=[*first["messages"], held])
    )
    assert events[-1]["result"] == "Second answer."
    assert len(llm.requests[-1].raw) < 100_000
    huge = run_input(
        "too long",
        thread="long",
        history=[{"id": "h", "role": "user", "content": "x" * (33 << 20)}],
    )
    body = assert_error(client.post("/api/agui", json=huge), 413, "32 MiB")
    assert "history" in body["error"]


def test_agui_abort_stops_the_task_within_a_second_and_409_names_the_thread(
    app, client, llm
) -> None:
    llm.push(stall(text("Thinking it over for a long while"), after=2, seconds=30))
    llm.push(text("After the abort."))
    with app.client() as other:
        with client.stream("POST", "/api/agui", json=run_input("slow one", thread="abort-me")) as r:
            lines = (line for line in r.iter_lines() if line.startswith("data: "))
            types = (json.loads(line[6:])["type"] for line in lines)
            assert next(types) == "RUN_STARTED"
            assert "TEXT_MESSAGE_CONTENT" in types  # the model is mid-answer (and stays so)
            # A second run on the thread while the first really streams: 409 naming the thread.
            busy = other.post("/api/agui", json=run_input("meanwhile", thread="abort-me"))
            assert_error(busy, 409, "abort-me")
        closed = time.monotonic()  # the client went away (HttpAgent.abortRun())
    wait_until(lambda: not session_of(client, "slow one")["running"], timeout=5, what="the stop")
    assert time.monotonic() - closed < 1.0
    assert session_of(client, "slow one")["state"] == "stopped"
    events = agui_events(client, run_input("next", thread="abort-me"))
    assert events[-1]["type"] == "RUN_FINISHED" and events[-1]["result"] == "After the abort."
