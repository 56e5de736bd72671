"""Constrained tool calling over real HTTP (docs/local-models.md, "Constrained tool calling"):
the request field each server kind gets on first contact, what is remembered, the fallback to
text tool calling when the field is refused or ignored, ``"auto"`` turning to constrained
calls when native ones prove unusable, and the fixes found on the real tier (issue 38)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from app.exceptions import LLMBadRequestError
from app.llm.call_schema import call_schema
from app.llm.constrained import copied_placeholders
from app.llm.endpoint_memory import default_memory
from app.llm.model import ToolDefinition
from app.prompt.constrained import CHOICE_INTRO, CHOICE_NOTE, PLACEHOLDER_COPIED
from app.schema import Message
from app.testing import ScriptedLLMServer, call, error, text, tool_calls
from app.testing.server_kinds import LLAMA_CPP_JSON_SCHEMA, PROSE, form_of, server_kind
from app.tool.terminate import Terminate

WRITE = {
    "type": "function",
    "function": {
        "name": "write_file",
        "description": "Write text to a file of the workspace.",
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "The file's path."},
                "text": {"type": "string", "description": "What to write."},
            },
            "required": ["path", "text"],
        },
    },
}
TERMINATE = Terminate().to_param()
TOOLS = [WRITE, TERMINATE]
GOOD = ("write_file", {"path": "hello.txt", "text": "Hello, world"})
USER = [Message.user_message("Create a file named hello.txt containing: Hello, world")]
#: After a tool ran: every tool may be called, terminate too.
LATER = [
    *USER,
    Message.from_tool_calls(
        tool_calls=[{"id": "c1", "function": {"name": "write_file", "arguments": "{}"}}]
    ),
    Message.tool_message("written", name="write_file", tool_call_id="c1"),
]


def schema_of(tools: list[dict[str, Any]]) -> dict[str, Any]:
    return call_schema([ToolDefinition.from_param(t) for t in tools]).schema


def forms(server: ScriptedLLMServer) -> list[str | None]:
    return [form_of(r.body) for r in server.requests]


def only_call(reply: Any) -> tuple[str, dict[str, Any]]:
    [made] = reply.message.tool_calls
    return made.function.name, json.loads(made.function.arguments)


# ---- each server kind gets its field, once --------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "tried"),
    [
        ("llama-cpp-python", ["json_schema", "json_object"]),
        ("vllm", ["json_schema"]),
        ("vllm-0.4", ["json_schema", "json_object", "guided_json"]),
        ("ollama", ["json_schema"]),
        ("openai", ["json_schema"]),
    ],
)
async def test_first_contact_finds_the_field_the_server_honours(llm_server, make_llm, kind, tried):
    """Each field is sent exactly as that server kind documents it, without ``tools``; a
    refusal (llama-cpp-python's HTTP 500 included) is not retried, and a field the server
    ignores is found out from its answer; the first that works is remembered, so a new
    process sends it at once."""
    llm_server.responder = server_kind(kind, [GOOD])
    llm = make_llm(model="local", tool_calling="constrained", max_retries=3)
    reply = await llm.request(USER, tools=TOOLS)
    assert only_call(reply) == GOOD and reply.finish_reason == "tool_calls"
    assert forms(llm_server) == tried
    schema = schema_of([WRITE])  # the first turn of a task: terminate is not offered
    for request in llm_server.requests:
        body = request.body
        assert "tools" not in body and "tool_choice" not in body
        form = form_of(body)
        if form == "json_schema":
            assert body["response_format"] == {
                "type": "json_schema",
                "json_schema": {"name": "tool_call", "schema": schema},
            }
        elif form == "json_object":
            assert body["response_format"] == {"type": "json_object", "schema": schema}
        else:
            assert body["guided_json"] == schema and "response_format" not in body
    assert default_memory().choices(llm_server.base_url, "local") == {"constrained": tried[-1]}

    again = await make_llm(model="local", tool_calling="constrained").request(LATER, tools=TOOLS)
    assert only_call(again) == GOOD
    assert forms(llm_server)[len(tried) :] == [tried[-1]]


def azure_llm(make_llm: Any, llm_server: ScriptedLLMServer, **overrides: Any) -> Any:
    """A constrained profile on an OpenAI endpoint (Azure: the scripted server's root URL)."""
    return make_llm(
        model="my-deployment",
        base_url=f"http://127.0.0.1:{llm_server.port}",
        api_key="azure-key-123456",
        api_type="azure",
        api_version="2024-10-21",
        max_retries=0,
        tool_calling="constrained",
        **overrides,
    )


async def test_openai_gets_strict_functions_and_a_forced_call(llm_server, make_llm):
    """OpenAI's own endpoints (Azure here) get strict function schemas, the call forced by
    tool_choice and one call a turn; the answer is the API's own tool call."""
    llm_server.responder = server_kind("openai", [GOOD])
    llm = azure_llm(make_llm, llm_server)
    reply = await llm.request(LATER, tools=TOOLS)
    assert only_call(reply) == GOOD
    [request] = llm_server.requests
    body = request.body
    assert form_of(body) == "strict" and "response_format" not in body
    assert body["tool_choice"] == "required" and body["parallel_tool_calls"] is False
    sent = {t["function"]["name"]: t["function"] for t in body["tools"]}
    assert sent["write_file"]["strict"] is True
    assert sent["write_file"]["parameters"] == {
        "type": "object",
        "properties": {"path": {"type": "string"}, "text": {"type": "string"}},
        "required": ["path", "text"],
        "additionalProperties": False,
    }
    assert sent["terminate"]["parameters"]["required"] == ["status"]


# ---- refused or ignored: text tool calling, said once ---------------------------------------


async def test_a_server_that_ignores_every_field_falls_back_to_text_once(
    llm_server, make_llm, warnings
):
    """A server that ignores every field answers prose each time: one warning names what was
    tried, the same turn is asked in text mode (the call read from the answer), and the next
    process goes straight to text mode."""
    llm_server.responder = server_kind("plain", [GOOD])
    llm = make_llm(model="local", tool_calling="constrained")
    reply = await llm.request(USER, tools=TOOLS)
    assert only_call(reply) == GOOD
    assert forms(llm_server) == ["json_schema", "json_object", "guided_json", None]
    last = llm_server.requests[-1].body
    assert "tools" not in last and "<tool_call>" in last["messages"][0]["content"]
    said = [w for w in warnings if "does not constrain" in w]
    assert len(said) == 1 and 'tool_calling = "text"' in said[0]
    assert "json_schema ignored" in said[0] and "guided_json ignored" in said[0]
    assert "constrained" in llm.refused_features

    await make_llm(model="local", tool_calling="constrained").request(USER, tools=TOOLS)
    assert forms(llm_server)[4:] == [None]


async def test_a_server_that_refuses_every_field_falls_back_to_text(llm_server, make_llm):
    def respond(request: Any) -> Any:
        if form_of(request.body):
            return error(400, "Unknown parameter: 'response_format'. guided_json is not allowed")
        return text('<tool_call>{"name": "write_file", "arguments": ' + json.dumps(GOOD[1]) + "}")

    llm_server.responder = respond
    llm = make_llm(model="local", tool_calling="constrained", max_retries=3)
    assert only_call(await llm.request(USER, tools=TOOLS)) == GOOD
    assert forms(llm_server) == ["json_schema", "json_object", "guided_json", None]


async def test_a_failure_that_is_no_refusal_is_raised_not_taken_for_one(llm_server, make_llm):
    llm_server.push(error(400, "model 'local' is not loaded"))
    llm = make_llm(model="local", tool_calling="constrained", max_retries=0)
    with pytest.raises(LLMBadRequestError, match="not loaded"):
        await llm.request(USER, tools=TOOLS)
    assert "constrained" not in llm.refused_features


async def test_a_validation_error_answered_as_http_500_is_not_retried(llm_server, make_llm):
    """llama-cpp-python answers a field it does not know with HTTP 500 and pydantic's
    validation error: asking again changes nothing."""
    llm_server.push(error(500, LLAMA_CPP_JSON_SCHEMA), text("never"))
    with pytest.raises(LLMBadRequestError, match="validation error"):
        await make_llm(max_retries=3).request(USER)
    assert len(llm_server.requests) == 1


# ---- what a constrained answer may be -------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        '{"name": "rm_rf", "arguments": {}}',  # a tool not offered
        '{"name": "write_file", "arguments": {"path": "a"}}',  # missing argument
        '{"name": "write_file", "arguments": {"path": "a", "text": "b", "mode": "x"}}',
        '{"name": "write_file", "arguments": {"path": 1, "text": "b"}}',
        "[" * 50_000,
        '{"name": "write_file", "arguments": ' + '{"a": ' * 5000 + "1" + "}" * 5001,
    ],
)
async def test_an_answer_outside_the_schema_never_confirms_the_field(llm_server, make_llm, answer):
    """A hostile or broken server's answer that does not match the schema is not taken for
    a working constraint: the next field is tried, and in the end text mode."""
    llm_server.responder = lambda request: text(answer) if form_of(request.body) else text("no")
    llm = make_llm(model="local", tool_calling="constrained")
    reply = await llm.request(USER, tools=TOOLS)
    assert not reply.message.tool_calls or reply.message.tool_calls[0].function.name != "rm_rf"
    assert default_memory().choices(llm_server.base_url, "local") == {}
    assert "constrained" in llm.refused_features


async def test_raw_newlines_and_trailing_text_are_read(llm_server, make_llm):
    """What llama-cpp-python's grammar lets through: a raw newline inside a string, text
    after the object."""
    llm_server.responder = lambda request: text(
        '{"name": "write_file", "arguments": {"path": "a.txt", "text": "one\ntwo"}}\n```\nDone.'
    )
    reply = await make_llm(model="local", tool_calling="constrained").request(USER, tools=TOOLS)
    assert only_call(reply) == ("write_file", {"path": "a.txt", "text": "one\ntwo"})


async def test_the_first_turn_cannot_end_the_task_and_later_ones_can(llm_server, make_llm):
    """Nothing done yet, a small model's favourite answer is terminate: not offered then.
    Tools are listed by relevance to the request, the closest last."""
    llm_server.responder = server_kind("ollama", [GOOD])
    llm = make_llm(model="local", tool_calling="constrained")
    await llm.request(USER, tools=TOOLS)
    await llm.request(LATER, tools=TOOLS)
    first, later = (r.body["response_format"]["json_schema"]["schema"] for r in llm_server.requests)
    assert first["properties"]["name"] == {"const": "write_file"}
    assert [o["properties"]["name"]["const"] for o in later["anyOf"]] == [
        "terminate",
        "write_file",
    ]


async def test_a_copied_placeholder_is_asked_again_and_never_run(llm_server, make_llm):
    """The examples show free text as placeholders (``<file name>``): an answer that sends
    one is asked again (told so, then without the examples); a call that still copies one
    is a call of no tool, never run."""
    copied = ("write_file", {"path": "<path>", "text": "<text>"})
    llm_server.responder = server_kind("ollama", [copied, GOOD])
    llm = make_llm(model="local", tool_calling="constrained")
    assert only_call(await llm.request(USER, tools=TOOLS)) == GOOD
    first, second = (r.body["messages"] for r in llm_server.requests)
    assert '"path": "<path>"' in first[0]["content"]  # the example, generated from the schema
    assert "copied placeholder values" in second[-1]["content"]

    llm_server.responder = server_kind("ollama", [copied])
    reply = await make_llm(model="local", tool_calling="constrained").request(USER, tools=TOOLS)
    [nameless] = reply.message.tool_calls
    assert nameless.function.name == ""
    assert copied_placeholders(nameless) == ["<path>", "<text>"]  # what benchmarks count
    assert '"<path>"' not in llm_server.requests[-1].body["messages"][0]["content"]


# ---- two steps: the tool's name, then its arguments ----------------------------------------


def system_and_last(request: Any) -> tuple[str, str]:
    messages = request.body["messages"]
    return messages[0]["content"], messages[-1]["content"]


async def test_two_steps_ask_for_the_name_then_for_that_tools_arguments(llm_server, make_llm):
    """``constrained_steps = 2``: the first request's schema is the offered names alone, the
    second's the chosen tool's arguments alone; both have the same system prompt (each tool's
    first sentence) and conversation, then a note saying what is asked (the name; that tool's
    arguments), with the user's request. The turn is one call, its usage both requests'."""
    llm_server.responder = server_kind("ollama", [GOOD])
    llm = make_llm(model="local", tool_calling="constrained", constrained_steps=2)
    reply = await llm.request(LATER, tools=TOOLS)
    assert only_call(reply) == GOOD and reply.finish_reason == "tool_calls"
    assert reply.usage.requests == 2
    first, second = llm_server.requests
    assert first.body["response_format"] == {
        "type": "json_schema",
        "json_schema": {
            "name": "tool_call",
            "schema": {
                "type": "object",
                "properties": {"name": {"enum": ["terminate", "write_file"]}},
                "required": ["name"],
            },
        },
    }
    system, last = system_and_last(first)
    assert system == (
        CHOICE_INTRO + "\n- terminate: End the current task.\n"
        '  Example: {"name": "terminate"}\n'
        "- write_file: Write text to a file of the workspace.\n"
        '  Example: {"name": "write_file"}'
    )
    request = USER[0].content
    assert last.endswith("\n\n" + CHOICE_NOTE.format(request=request))
    assert second.body["response_format"]["json_schema"]["schema"] == {
        "type": "object",
        "properties": {"path": {"type": "string"}, "text": {"type": "string"}},
        "required": ["path", "text"],
    }
    # The same conversation and system prompt (a prompt cache serves it), another note.
    assert second.body["messages"][:-1] == first.body["messages"][:-1]
    assert system_and_last(second)[1].endswith(
        "\n\nThe next step calls write_file: Write text to a file of the workspace.\n"
        "Its arguments (* marks the required ones):\n"
        "  path* (string): The file's path.\n"
        "  text* (string): What to write.\n"
        'Example: {"path": "<path>", "text": "<text>"}\n'
        f"The task: {request}\n"
        "Answer with the arguments of write_file as one JSON object, the values taken from "
        "the task and the results so far."
    )
    assert [m["role"] for m in second.body["messages"]] == ["system", "user", "assistant", "user"]


async def test_two_steps_skip_the_name_when_one_tool_is_offered_and_learn_the_field(
    llm_server, make_llm
):
    """One tool offered (the first turn: no terminate): only its arguments are asked for, and
    first contact finds the field by that request (llama-cpp-python: json_schema refused)."""
    llm_server.responder = server_kind("llama-cpp-python", [GOOD])
    llm = make_llm(model="local", tool_calling="constrained", constrained_steps=2)
    assert only_call(await llm.request(USER, tools=TOOLS)) == GOOD
    assert forms(llm_server) == ["json_schema", "json_object"]
    arguments = schema_of([WRITE])["properties"]["arguments"]
    assert llm_server.requests[1].body["response_format"] == {
        "type": "json_object",
        "schema": arguments,
    }
    assert default_memory().choices(llm_server.base_url, "local") == {"constrained": "json_object"}


async def test_two_steps_ask_again_for_arguments_that_copy_a_placeholder(llm_server, make_llm):
    """Arguments sending the example's placeholder are asked again, told so and without the
    example; copied again, the call is a call of no tool, never run."""
    copied = ("write_file", {"path": "<path>", "text": "Hello, world"})
    llm_server.responder = server_kind("ollama", [copied, GOOD])
    llm = make_llm(model="local", tool_calling="constrained", constrained_steps=2)
    assert only_call(await llm.request(USER, tools=TOOLS)) == GOOD
    first, second = (r.body["messages"][-1]["content"] for r in llm_server.requests)
    assert 'Example: {"path": "<path>", "text": "<text>"}' in first
    assert "Example:" not in second and second.endswith("\n" + PLACEHOLDER_COPIED)

    llm_server.responder = server_kind("ollama", [copied])
    reply = await make_llm(model="local", tool_calling="constrained", constrained_steps=2).request(
        USER, tools=TOOLS
    )
    [nameless] = reply.message.tool_calls
    assert nameless.function.name == "" and len(llm_server.requests) == 4


async def test_two_steps_keep_a_wrong_name_from_running_anything(llm_server, make_llm):
    """A first answer naming no offered tool (the field not honoured) is not taken for a
    call: the endpoint goes to text tool calling as with one step."""
    llm_server.responder = server_kind("plain", [GOOD])
    llm = make_llm(model="local", tool_calling="constrained", constrained_steps=2)
    assert only_call(await llm.request(LATER, tools=TOOLS)) == GOOD
    assert forms(llm_server) == ["json_schema", "json_object", "guided_json", None]


async def test_two_steps_leave_openais_strict_functions_one_request(llm_server, make_llm):
    """A form whose answer is the API's own tool call (strict functions) stays one request."""
    llm_server.responder = server_kind("openai", [GOOD])
    llm = azure_llm(make_llm, llm_server, constrained_steps=2)
    assert only_call(await llm.request(LATER, tools=TOOLS)) == GOOD
    assert forms(llm_server) == ["strict"]


# ---- auto: native calls until they prove unusable -------------------------------------------


def manus_tools(tmp_path: Path) -> list[dict[str, Any]]:
    from app.agent.manus import Manus

    return Manus.default_tools(tmp_path).to_params()


async def test_auto_turns_constrained_when_the_server_left_the_tools_out(
    llm_server, make_llm, tmp_path, warnings
):
    """A server whose chat template drops the tools counts a prompt far smaller than the
    tools alone (here in the stream's usage): said once, remembered, and the same turn asked
    constrained. The watched first turn streams as it would anywhere."""
    big = manus_tools(tmp_path)

    def respond(request: Any) -> Any:
        if form_of(request.body):
            return server_kind("llama-cpp-python", [("bash", {"command": "ls"})])(request)
        return text(PROSE, usage={"prompt_tokens": 120, "completion_tokens": 9})

    llm_server.responder = respond
    llm = make_llm(model="local")
    reply = await llm.request(USER, tools=big, on_delta=lambda _: None)
    assert only_call(reply) == ("bash", {"command": "ls"})
    first = llm_server.requests[0]
    assert first.tools and first.stream
    assert forms(llm_server) == [None, "json_schema", "json_object"]
    said = [w for w in warnings if "left them out of the prompt" in w]
    assert len(said) == 1 and "switching to constrained tool calling" in said[0]
    assert "native_calls" in llm.refused_features
    await make_llm(model="local").request(USER, tools=big)
    assert forms(llm_server)[-1] == "json_object"  # remembered: no native turn first


async def test_a_stream_without_usage_makes_the_next_native_turn_plain(
    llm_server, make_llm, tmp_path, warnings
):
    """llama-cpp-python counts nothing in a stream: a watched first turn streams, comes back
    without usage and cannot be judged; the next native turn is asked plainly, its count
    shows the tools left out, and that turn is asked constrained."""
    big = manus_tools(tmp_path)

    def respond(request: Any) -> Any:
        if form_of(request.body):
            return server_kind("llama-cpp-python", [("bash", {"command": "ls"})])(request)
        usage = False if request.body.get("stream") else {"prompt_tokens": 120}
        return text(PROSE, usage=usage)

    llm_server.responder = respond
    llm = make_llm(model="local")
    first = await llm.request(USER, tools=big, on_delta=lambda _: None)
    assert first.message.content == PROSE and "native_calls" not in llm.refused_features
    second = await llm.request(USER, tools=big, on_delta=lambda _: None)
    assert only_call(second) == ("bash", {"command": "ls"})
    assert [r.stream for r in llm_server.requests[:2]] == [True, False]
    assert forms(llm_server)[:2] == [None, None]
    assert [w for w in warnings if "left them out of the prompt" in w]


async def test_native_calls_and_a_profiles_stream_true_are_never_second_guessed(
    llm_server, make_llm, tmp_path
):
    """A reply with native calls shows the server saw the tools, whatever usage it reports
    (a proxy or a test double may report a fixed small count); ``stream = true`` keeps every
    turn streamed even when a stream reports no usage."""
    big = manus_tools(tmp_path)
    calls = tool_calls(call("bash", {"command": "ls"}), usage={"prompt_tokens": 10})
    llm_server.push(calls, calls)
    llm = make_llm(model="local")
    for _ in range(2):
        assert only_call(await llm.request(USER, tools=big)) == ("bash", {"command": "ls"})
    assert forms(llm_server) == [None, None] and llm.refused_features == frozenset()
    llm_server.push(*[text(PROSE, usage=False)] * 2)
    streamed = make_llm(model="other", stream=True)
    for _ in range(2):
        await streamed.request(USER, tools=big)
    assert [r.stream for r in llm_server.requests[2:]] == [True, True]


async def test_a_call_of_a_tool_that_does_not_exist_is_not_a_schema_failure(llm_server, make_llm):
    """A strong model's slip (a made-up tool name, twice) is answered by the agent with the
    tools there are; it must not turn the endpoint constrained for good."""
    made_up = tool_calls(call("write_files", {"path": "a.txt"}))
    llm_server.push(made_up, made_up, made_up)
    llm = make_llm(model="local")
    for _ in range(3):
        await llm.request(LATER, tools=TOOLS)
    assert forms(llm_server) == [None, None, None] and llm.refused_features == frozenset()


async def test_auto_turns_constrained_when_native_calls_keep_failing_their_schemas(
    llm_server, make_llm
):
    bad = tool_calls(call("write_file", {"path": "a.txt"}))  # no text
    llm_server.push(bad, bad)
    llm_server.responder = server_kind("vllm", [GOOD])
    llm = make_llm(model="local")
    for _ in range(3):
        await llm.request(LATER, tools=TOOLS)
    assert forms(llm_server) == [None, None, "json_schema"]
    assert [bool(r.tools) for r in llm_server.requests] == [True, True, False]


async def test_auto_keeps_native_calls_that_are_valid(llm_server, make_llm):
    llm_server.responder = server_kind("vllm", [GOOD])
    llm = make_llm(model="local")
    for _ in range(5):
        assert only_call(await llm.request(LATER, tools=TOOLS)) == GOOD
    assert forms(llm_server) == [None] * 5 and all(r.tools for r in llm_server.requests)
    assert llm.refused_features == frozenset()


async def test_native_mode_only_says_that_the_tools_were_left_out(
    llm_server, make_llm, tmp_path, warnings
):
    llm_server.push(*[text(PROSE, usage={"prompt_tokens": 120, "completion_tokens": 9})] * 2)
    llm = make_llm(model="local", tool_calling="native")
    for _ in range(2):
        reply = await llm.request(USER, tools=manus_tools(tmp_path))
        assert reply.message.content == PROSE
    said = [w for w in warnings if "left them out of the prompt" in w]
    assert len(said) == 1 and 'tool_calling = "constrained"' in said[0]
    assert forms(llm_server) == [None, None] and llm.refused_features == frozenset()


# ---- issue 38's real-tier findings ----------------------------------------------------------


async def test_a_template_without_system_role_gets_the_system_prompt_in_the_user_turn(
    llm_server, make_llm, warnings
):
    """llama-cpp-python's ``gemma`` format drops system messages: the server counts a prompt
    far smaller than the system prompt alone. The turn is asked again with the system prompt
    at the start of the first user message, and that is remembered."""
    system = [Message.system_message("You are a careful agent. " * 200)]
    llm_server.push(
        text("{}", usage={"prompt_tokens": 40, "completion_tokens": 2}),
        text('<tool_call>{"name": "write_file", "arguments": ' + json.dumps(GOOD[1]) + "}"),
        text('<tool_call>{"name": "write_file", "arguments": ' + json.dumps(GOOD[1]) + "}"),
    )
    llm = make_llm(model="local", tool_calling="text")
    assert only_call(await llm.request(USER, system_msgs=system, tools=TOOLS)) == GOOD
    first, second = (r.body["messages"] for r in llm_server.requests)
    assert [m["role"] for m in first] == ["system", "user"]
    assert [m["role"] for m in second] == ["user"]
    assert second[0]["content"].startswith("You are a careful agent.")
    assert second[0]["content"].endswith(USER[0].content)
    assert [w for w in warnings if "leaves system messages out" in w]
    await make_llm(model="local", tool_calling="text").request(
        USER, system_msgs=system, tools=TOOLS
    )
    assert [m["role"] for m in llm_server.requests[-1].body["messages"]] == ["user"]


async def test_text_mode_counts_the_tools_in_an_estimated_prompt(llm_server, make_llm, tmp_path):
    """A server that reports no usage: the estimate counts the tools, which text mode puts in
    the prompt (it counted only the conversation: 208 tokens where the server saw 1,392)."""
    big = manus_tools(tmp_path)
    answer = '<tool_call>{"name": "bash", "arguments": {"command": "ls"}}</tool_call>'
    llm_server.push(text(answer, usage=False), text(answer, usage=False))
    with_tools = await make_llm(model="local", tool_calling="text").request(USER, tools=big)
    without = await make_llm(model="local", tool_calling="text").request(USER)
    assert with_tools.usage.estimated and without.usage.estimated
    tools_chars = len(json.dumps(big))
    assert with_tools.usage.prompt_tokens - without.usage.prompt_tokens > tools_chars / 8


async def test_a_copied_text_mode_example_is_never_run(llm_server, make_llm, warnings):
    """Gemma copied the text-mode prompt's example call word for word: a call of the
    example's placeholder name is a call of no tool (the agent answers it so), never run."""
    from app.prompt.text_tools import TOOL_PROMPT_INTRO

    example = next(line for line in TOOL_PROMPT_INTRO.splitlines() if "<tool_call>" in line)
    llm_server.push(text(example), text('<tool_call>{"name": "tool_name", "arguments": {}}'))
    llm = make_llm(model="local", tool_calling="text")
    for _ in range(2):
        [made] = (await llm.request(USER, tools=TOOLS)).message.tool_calls
        assert made.function.name == "" and copied_placeholders(made) is None
    assert len([w for w in warnings if "example call" in w]) == 2


# ---- a refused stream, then a fresh connection ----------------------------------------------


class DroppingServer:
    """llama-cpp-python's ``chatml-function-calling`` server, as far as connections go: a
    streamed request with tools gets an empty event stream, after which the server drops
    that keep-alive connection without a word; anything else gets a tool call. Records the
    connection each request came on."""

    def __init__(self) -> None:
        self.requests: list[tuple[int, bool]] = []
        self._server: asyncio.AbstractServer | None = None
        self._connections = 0

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/v1"

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._connections += 1
        number, poisoned = self._connections, False
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                body = json.loads(await reader.readexactly(length))
                stream = bool(body.get("stream"))
                self.requests.append((number, stream))
                if poisoned:
                    break  # the dropped keep-alive connection: no answer at all
                if stream and body.get("tools"):
                    events = b": ping\n\n"
                    chunk = b"%x\r\n%s\r\n0\r\n\r\n" % (len(events), events)
                    writer.write(
                        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                        b"transfer-encoding: chunked\r\n\r\n" + chunk
                    )
                    poisoned = True
                else:
                    answer = json.dumps(
                        {
                            "choices": [
                                {
                                    "index": 0,
                                    "finish_reason": "tool_calls",
                                    "message": {
                                        "role": "assistant",
                                        "content": None,
                                        "tool_calls": [
                                            {
                                                "id": "c1",
                                                "type": "function",
                                                "function": {
                                                    "name": "write_file",
                                                    "arguments": json.dumps(GOOD[1]),
                                                },
                                            }
                                        ],
                                    },
                                }
                            ],
                            "usage": {"prompt_tokens": 50, "completion_tokens": 9},
                        }
                    ).encode()
                    writer.write(
                        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                        b"content-length: %d\r\n\r\n%s" % (len(answer), answer)
                    )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


async def test_after_a_refused_stream_the_plain_ask_goes_on_a_fresh_connection(warnings):
    """First contact with a chatml-function-calling server logged "Could not reach the LLM
    endpoint ... Server disconnected; retry 1/5": the plain ask went on the connection the
    server had dropped. It now goes on a new one: no retry needed (max_retries 0)."""
    from app.config import LLMSettings
    from app.llm import LLM

    server = DroppingServer()
    base_url = await server.start()
    try:
        settings = LLMSettings(
            model="local", base_url=base_url, api_key="sk-x", max_retries=0, timeout=10
        )
        llm = LLM.create(llm_config=settings)
        reply = await llm.request(USER, tools=TOOLS, on_delta=lambda _: None)
        assert only_call(reply) == GOOD
        again = await llm.request(LATER, tools=TOOLS, on_delta=lambda _: None)
        assert only_call(again) == GOOD
        await llm.aclose()
    finally:
        await server.stop()
    assert server.requests[:2] == [(1, True), (2, False)]
    assert all(not stream for _, stream in server.requests[1:])
    assert not [w for w in warnings if "Could not reach" in w or "retry" in w]
