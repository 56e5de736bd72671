"""What traces may carry (docs/tracing.md#what-is-redacted): a hostile model plants the API
key in a tool-call id, a finish reason, a tool name, call arguments and its text, and the
model server answers 400 quoting the prompt; the spans main.py exports reach a real OTLP
receiver (``tests/otlp_receiver.py``), whose bytes and decoded spans hold neither the key, in
any encoding, nor (with contents off) the prompt. Arize Phoenix, a real backend, gets the same
run in tests/test_tracing.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Status, StatusCode

from app.logger import register_secret
from app.redaction import redact_text
from app.testing import ScriptedLLMServer, error
from app.tracing import RedactedSpan, redacting
from tests.hostile_model import (
    KEY,
    PROMPT_WORDS,
    encoded,
    hostile_config,
    hostile_turn,
    leaks,
)
from tests.otlp_receiver import OtlpReceiver, ReceivedSpan
from tests.test_tracing import run_program

PROMPT = f"Summarise the {PROMPT_WORDS}; my key is {KEY}"


def traced_run(tmp_path: Path, content: bool) -> tuple[list[ReceivedSpan], bytes, str]:
    """main.py --trace against the hostile model, whose second request the server refuses
    with a 400 quoting the prompt; the spans, the bytes received and the program's stderr."""
    with ScriptedLLMServer() as server, OtlpReceiver() as receiver:
        server.push(hostile_turn(), error(400, f"Invalid request: '{PROMPT}' is not allowed"))
        tracing = (
            f'[tracing]\nendpoint = "{receiver.url}"\nrecord_content = {str(content).lower()}\n'
        )
        config = hostile_config(tmp_path, server.base_url, tracing)
        workspace = tmp_path / "ws"
        workspace.mkdir()
        out, _ = run_program(
            tmp_path, "-c", str(config), "-w", str(workspace), "-p", PROMPT, "--trace"
        )
        assert out.returncode == 1, out.stderr  # the run failed on the 400
        assert server.remaining == 0
        spans = receiver.wait_for(lambda s: any(x.name.startswith("invoke_agent") for x in s))
        return spans, b"".join(receiver.bodies), out.stderr


@pytest.mark.e2e
@pytest.mark.parametrize("content", [False, True], ids=["content-off", "content-on"])
def test_a_hostile_run_exports_no_key_and_without_contents_no_prompt(tmp_path, content):
    spans, body, stderr = traced_run(tmp_path, content)
    assert "Tracing:" not in stderr  # delivered
    assert leaks(body) == []
    for span in spans:
        assert leaks("\n".join(span.texts())) == [], span

    # Each planted place reached a span, redacted.
    tools = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "execute_tool"]
    assert {s.name for s in tools} == {
        "execute_tool ***",
        "execute_tool str_replace_editor",
        "execute_tool bash",
    }
    assert {s.attributes["gen_ai.tool.call.id"] for s in tools} == {"named", "***", "c-***"}
    (named,) = [s for s in tools if s.attributes["gen_ai.tool.call.id"] == "named"]
    assert named.attributes["gen_ai.tool.name"] == named.attributes["tool.name"] == "***"
    chat = next(s for s in spans if s.attributes.get("gen_ai.operation.name") == "chat")
    assert chat.attributes["gen_ai.response.finish_reasons"] == ["***"]
    (run,) = [s for s in spans if s.name == "invoke_agent Manus"]
    (step,) = [s for s in spans if s.name == "step 2"]
    assert run.status_code == step.status_code == 2  # ERROR
    (event,) = step.events
    assert event[0] == "exception" and event[1]["exception.type"] == "LLMBadRequestError"

    if not content:
        # The server's text (quoting the prompt) is gone: its type and status remain.
        assert PROMPT_WORDS.encode() not in body
        assert run.status_message == step.status_message == "LLMBadRequestError (HTTP 400)"
        assert event[1]["exception.message"] == "LLMBadRequestError (HTTP 400)"
        assert not any(k.startswith(("input.", "output.")) for s in spans for k in s.attributes)
    else:
        # Contents were asked for: the prompt and the server's words are there, the key not.
        assert run.attributes["input.value"] == f"Summarise the {PROMPT_WORDS}; my key is ***"
        assert (
            "(HTTP 400)" in run.status_message
            and f"{PROMPT_WORDS}; my key is ***" in (event[1]["exception.message"])
        )
        calls = json.loads(chat.attributes["gen_ai.output.tool_calls"])
        assert {c["id"] for c in calls} == {"named", "***", "c-***"}
        assert {c["name"] for c in calls} == {"***", "str_replace_editor", "bash"}
        assert json.loads(named.attributes["gen_ai.tool.call.arguments"]) == {"note": "***"}
        assert chat.attributes["output.value"] == "***"  # the model's text: the key alone


def test_every_part_of_a_span_is_redacted_on_any_provider():
    """Through an application's own provider and the real OTLP exporter: names, keys and
    values of every attribute type (lists, bytes, nested), events, links, status texts and
    recorded exceptions all pass the redactor."""
    register_secret(KEY)
    with OtlpReceiver() as receiver:
        provider = TracerProvider()
        exporter = OTLPSpanExporter(endpoint=f"{receiver.url}/v1/traces", timeout=10)
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        tracer = redacting(provider.get_tracer("test"))
        assert redacting(tracer) is tracer
        parent = tracer.start_span(f"parent {KEY}", attributes={KEY: KEY, "n": 3, "ok": True})
        assert isinstance(parent, RedactedSpan)
        parent.set_attribute("list", [KEY, f"x {encoded()}", "plain"])
        parent.set_attribute("bytes", KEY.encode())
        parent.set_attributes({"more": f"sk-{'a' * 20}", f"k-{KEY}": 1.5})
        parent.add_event(f"event {KEY}", {"why": f"Bearer {KEY}"})
        parent.update_name(f"renamed {KEY}")
        parent.set_status(Status(StatusCode.ERROR, f"failed with {KEY}"))
        parent.record_exception(ValueError(f"bad {KEY}"), {"extra": KEY})
        with tracer.start_as_current_span("child", links=None) as child:
            child.add_link(parent.get_span_context(), {"link": KEY})
            child.set_status(StatusCode.ERROR, f"child failed: {KEY}")
        with pytest.raises(RuntimeError), tracer.start_as_current_span("raising"):
            raise RuntimeError(f"raised with {KEY}")
        parent.end()
        provider.shutdown()
        spans = receiver.wait_for(lambda s: len(s) == 3)
    body = b"".join(receiver.bodies)
    assert len(spans) == 3 and leaks(body) == []
    by_name = {s.name: s for s in spans}
    renamed = by_name["renamed ***"]
    assert renamed.attributes["***"] == "***" and renamed.attributes["n"] == 3
    assert renamed.attributes["list"] == ["***", f"x {redact_text(encoded())}", "plain"]
    assert renamed.attributes["bytes"] == b"***" and renamed.attributes["more"] == "***"
    assert renamed.attributes["k-***"] == 1.5
    assert renamed.status_message == "failed with ***"
    assert [name for name, _ in renamed.events] == ["event ***", "exception"]
    assert renamed.events[0][1] == {"why": "Bearer ***"}
    assert renamed.events[1][1]["exception.message"] == "bad ***"
    assert renamed.events[1][1]["extra"] == "***"
    assert by_name["child"].status_message == "child failed: ***"
    raising = by_name["raising"]
    assert raising.status_code == 2 and "***" in raising.status_message
    assert raising.events[0][1]["exception.message"] == "raised with ***"
    assert "exception.stacktrace" not in raising.events[0][1]
