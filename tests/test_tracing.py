"""Traces (docs/tracing.md): the spans a run makes, what they carry, and what tracing costs
when it is off or its backend is down.

The span tree is checked in process through an SDK tracer provider of the test's own with an
in-memory exporter (the way an application that configured OpenTelemetry itself sees them);
the programs are run as subprocesses against a closed port and against Arize Phoenix, a real
trace backend (``tests/phoenix.py``), whose own API is read back.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
import time
import urllib.error
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from app.agent.toolcall import ToolCallAgent
from app.config import TracingSettings
from app.flow import FlowFactory, FlowType
from app.logger import register_secret
from app.testing import call, error, text, tool_calls
from app.tool.base import BaseTool
from app.tool.tool_collection import ToolCollection
from app.tracing import RunTracer
from tests.hostile_model import final_turn, hostile_config, hostile_turn, leaks
from tests.phoenix import Phoenix, start_phoenix
from tests.test_main_e2e import child_env, write_config

ROOT = Path(__file__).resolve().parent.parent
SECRET = "tracing-secret-0123456789abcdef"


class Lookup(BaseTool):
    name: str = "lookup"
    description: str = "Look a key up."
    parameters: dict = {"type": "object", "properties": {"key": {"type": "string"}}}

    async def execute(self, key: str = "") -> object:
        if key == "missing":
            return self.fail_response(f"no such key (token {SECRET})")
        return self.success_response(f"value of {key}")


@pytest.fixture
def spans() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def traced(target: Any, provider: TracerProvider, **settings: Any) -> RunTracer:
    agents = {a.name: a for a in target.agents.values()} if hasattr(target, "agents") else {}
    listener = RunTracer(
        provider.get_tracer("test"),
        TracingSettings(**settings),
        agents or {target.name: target},
    )
    target.events.subscribe(listener)
    return listener


def by_name(finished: tuple[ReadableSpan, ...]) -> dict[str, list[ReadableSpan]]:
    out: dict[str, list[ReadableSpan]] = {}
    for span in finished:
        out.setdefault(span.name, []).append(span)
    return out


def parent_of(span: ReadableSpan, finished: tuple[ReadableSpan, ...]) -> ReadableSpan | None:
    assert span.parent is not None
    return next(s for s in finished if s.context.span_id == span.parent.span_id)


def script_tool_run(llm_server: Any) -> None:
    llm_server.push(
        tool_calls(
            call("lookup", {"key": "x"}, id="ok"),
            call("lookup", {"key": "missing"}, id="bad"),
            content="Looking both up.",
            usage={"prompt_tokens": 50, "completion_tokens": 7},
        ),
        text("x is known.", usage={"prompt_tokens": 80, "completion_tokens": 5}),
    )


async def test_a_run_is_one_trace_of_steps_model_calls_and_tool_calls(llm_server, make_llm, spans):
    provider, exporter = spans
    script_tool_run(llm_server)
    agent = ToolCallAgent(llm=make_llm(), available_tools=ToolCollection(Lookup()))
    traced(agent, provider)
    result = await agent.run(f"look x up, my key is {SECRET}")

    finished = exporter.get_finished_spans()
    names = by_name(finished)
    assert len({s.context.trace_id for s in finished}) == 1  # one trace
    (run,) = names["invoke_agent toolcall"]
    assert run.parent is None
    assert run.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert run.attributes["gen_ai.usage.input_tokens"] == result.usage.prompt_tokens == 130
    assert run.attributes["gen_ai.usage.output_tokens"] == result.usage.completion_tokens == 12
    assert run.attributes["openmanus.stop_reason"] == "completed"
    steps = names["step 1"] + names["step 2"]
    assert all(parent_of(s, finished) is run for s in steps)
    chats = names["chat gpt-4o-mini"]
    assert [parent_of(c, finished).name for c in chats] == ["step 1", "step 2"]
    assert [c.attributes["gen_ai.usage.input_tokens"] for c in chats] == [50, 80]
    assert sum(c.attributes["gen_ai.usage.output_tokens"] for c in chats) == 12
    assert chats[0].attributes["gen_ai.request.model"] == "gpt-4o-mini"
    assert chats[0].attributes["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert chats[0].end_time >= chats[0].start_time
    tools = {s.attributes["gen_ai.tool.call.id"]: s for s in names["execute_tool lookup"]}
    assert set(tools) == {"ok", "bad"}
    assert all(parent_of(s, finished).name == "step 1" for s in tools.values())
    assert tools["ok"].attributes["gen_ai.tool.name"] == "lookup"
    assert tools["ok"].status.status_code == StatusCode.UNSET
    assert tools["bad"].status.status_code == StatusCode.ERROR
    assert [e.name for e in tools["bad"].events] == ["exception"]
    # No contents without the opt-in: no prompt, no arguments, no results, no answer.
    dumped = json.dumps(
        [dict(s.attributes) for s in finished]
        + [dict(e.attributes) for s in finished for e in s.events]
    )
    assert "look x up" not in dumped and '"key"' not in dumped and "value of x" not in dumped
    assert SECRET not in dumped and "x is known" not in dumped


async def test_costs_are_on_the_model_calls_and_the_run(llm_server, spans, tmp_path):
    from app.config import AppConfig, config
    from app.llm import LLM
    from tests.conftest import llm_settings

    provider, exporter = spans
    settings = llm_settings(llm_server)
    config.use(
        AppConfig(
            llm=settings,
            workspace_root=tmp_path,
            pricing={"gpt-4o-mini": {"input": 2.5, "output": 10.0}},
        )
    )
    try:
        script_tool_run(llm_server)
        agent = ToolCallAgent(
            llm=LLM.create(llm_config=settings), available_tools=ToolCollection(Lookup())
        )
        traced(agent, provider)
        result = await agent.run("look x up")
    finally:
        config.reset()
    names = by_name(exporter.get_finished_spans())
    costs = [c.attributes["openmanus.cost"] for c in names["chat gpt-4o-mini"]]
    assert costs == pytest.approx([(50 * 2.5 + 7 * 10) / 1e6, (80 * 2.5 + 5 * 10) / 1e6])
    (run,) = names["invoke_agent toolcall"]
    assert run.attributes["openmanus.cost"] == pytest.approx(result.usage.cost)


async def test_a_model_call_that_fails_marks_its_step_and_run_as_errors(
    llm_server, make_llm, spans
):
    provider, exporter = spans
    llm_server.push(error(401, "bad key"))
    agent = ToolCallAgent(llm=make_llm(max_retries=0))
    traced(agent, provider)
    result = await agent.run("hello")
    assert result.error is not None

    names = by_name(exporter.get_finished_spans())
    (step,) = names["step 1"]
    (run,) = names["invoke_agent toolcall"]
    assert step.status.status_code == StatusCode.ERROR
    (event,) = step.events
    assert event.name == "exception"
    assert event.attributes["exception.type"] == type(result.error).__name__
    assert run.status.status_code == StatusCode.ERROR
    assert run.attributes["openmanus.stop_reason"] == "error"


async def test_contents_only_on_opt_in_and_always_redacted(llm_server, make_llm, spans):
    provider, exporter = spans
    register_secret(SECRET)
    script_tool_run(llm_server)
    agent = ToolCallAgent(llm=make_llm(), available_tools=ToolCollection(Lookup()))
    traced(agent, provider, record_content=True, max_content_chars=200)
    await agent.run(f"look x up, my key is {SECRET}")

    finished = exporter.get_finished_spans()
    names = by_name(finished)
    (run,) = names["invoke_agent toolcall"]
    assert run.attributes["input.value"] == "look x up, my key is ***"
    assert run.attributes["output.value"] == "x is known."
    tools = {s.attributes["gen_ai.tool.call.id"]: s for s in names["execute_tool lookup"]}
    assert json.loads(tools["ok"].attributes["gen_ai.tool.call.arguments"]) == {"key": "x"}
    assert tools["ok"].attributes["gen_ai.tool.call.result"].endswith("value of x")
    assert "***" in tools["bad"].attributes["gen_ai.tool.call.result"]
    assert "***" in tools["bad"].status.description
    chat = names["chat gpt-4o-mini"][0]
    assert chat.attributes["output.value"] == "Looking both up."
    dumped = json.dumps([dict(s.attributes) for s in finished], default=str)
    assert SECRET not in dumped and SECRET not in str([s.events for s in finished])


async def test_a_flow_traces_each_plan_step_with_its_agent(llm_server, make_llm, spans, tmp_path):
    from app.agent import Manus

    provider, exporter = spans
    llm_server.push(
        tool_calls(
            call(
                "planning",
                {"command": "create", "plan_id": "p", "title": "T", "steps": ["say hi", "wave"]},
            )
        ),
        tool_calls(call("terminate", {"status": "success"}), content="hi said"),
        tool_calls(call("terminate", {"status": "success"}), content="waved"),
        text("All done."),
    )
    agent = Manus(llm=make_llm(), workspace=tmp_path)
    flow = FlowFactory.create_flow(FlowType.PLANNING, {"manus": agent}, llm=make_llm())
    traced(flow, provider)
    await flow.execute("greet")

    finished = exporter.get_finished_spans()
    names = by_name(finished)
    (root,) = [s for s in finished if s.parent is None]
    assert root.name.startswith("flow ")
    assert root.attributes["openmanus.plan.total_steps"] == 2
    plan_steps = [s for s in finished if s.name.startswith("plan step")]
    assert [s.name for s in plan_steps] == ["plan step 0", "plan step 1"]
    assert all(parent_of(s, finished) is root for s in plan_steps)
    assert all(s.attributes["gen_ai.agent.name"] == "Manus" for s in plan_steps)
    runs = names["invoke_agent Manus"]
    assert [parent_of(r, finished).name for r in runs] == ["plan step 0", "plan step 1"]
    assert len({s.context.trace_id for s in finished}) == 1
    # The flow's own model calls (planning, the summary) are model calls of the flow.
    flow_calls = [s for s in names[f"chat {flow.llm.model}"] if parent_of(s, finished) is root]
    assert len(flow_calls) == 2, [s.name for s in finished]
    assert all(s.attributes["gen_ai.operation.name"] == "chat" for s in flow_calls)


async def test_tracing_alone_leaves_the_run_as_if_nobody_watched(llm_server, make_llm, spans):
    """A trace only records (``passive``): the model's text is not streamed to it as deltas,
    and the run still logs its progress, as when nobody listens."""
    from app.logger import logger

    provider, _ = spans
    seen: list[str] = []
    handler = logger.add(lambda m: seen.append(m.record["message"]), level="INFO")
    try:
        script_tool_run(llm_server)
        agent = ToolCallAgent(llm=make_llm(), available_tools=ToolCollection(Lookup()))
        traced(agent, provider)
        assert agent.events.active and not agent.events.watched
        await agent.run("look x up")
    finally:
        logger.remove(handler)
    assert "Executing step 1/30" in seen
    assert any("thoughts: Looking both up." in line for line in seen)
    agent.subscribe(lambda event: None)  # a listener that shows the run
    assert agent.events.watched


def test_the_endpoint_comes_from_the_config_else_the_standard_variables(monkeypatch):
    from app.tracing import _endpoint

    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    assert _endpoint(TracingSettings()) == "http://localhost:4318/v1/traces"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/")
    assert _endpoint(TracingSettings()) == "http://collector:4318/v1/traces"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://traces:9/custom")
    assert _endpoint(TracingSettings()) == "http://traces:9/custom"  # taken as it is
    configured = TracingSettings(endpoint="http://127.0.0.1:6006")
    assert _endpoint(configured) == "http://127.0.0.1:6006/v1/traces"


@pytest.mark.e2e
def test_tracing_off_loads_no_opentelemetry():
    """The programs and the agent loop, run with tracing off: not one opentelemetry module."""
    code = textwrap.dedent(
        """
        import asyncio, sys
        import app.cli.session, app.batch.execute, app.agent.manus
        from app.agent.toolcall import ToolCallAgent
        from app.llm import LLM
        from app.config import LLMSettings
        from app.testing import ScriptedLLMServer, text
        server = ScriptedLLMServer(); server.start()
        server.push(text("hi"))
        llm = LLM.create(llm_config=LLMSettings(
            model="m", base_url=server.base_url, api_key="sk-test-0123456789abcdefghij"))
        agent = ToolCallAgent(llm=llm)
        agent.subscribe(lambda event: None)
        asyncio.run(agent.run("hello"))
        server.stop()
        print(sorted(m for m in sys.modules if m.split(".")[0] == "opentelemetry"
                     or m == "app.tracing"))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.e2e
def test_the_application_s_tracer_provider_is_used_not_replaced():
    code = textwrap.dedent(
        """
        import asyncio
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        import app.tracing as tracing
        from app.agent.toolcall import ToolCallAgent
        from app.llm import LLM
        from app.config import LLMSettings
        from app.testing import ScriptedLLMServer, text
        server = ScriptedLLMServer(); server.start()
        server.push(text("hi"))
        llm = LLM.create(llm_config=LLMSettings(
            model="m", base_url=server.base_url, api_key="sk-test-0123456789abcdefghij"))
        agent = ToolCallAgent(llm=llm)
        stop = tracing.trace(agent)
        asyncio.run(agent.run("hello"))
        stop(); server.stop()
        assert trace.get_tracer_provider() is provider
        assert tracing._own is None  # no exporter of ours
        print(sorted(s.name for s in exporter.get_finished_spans()))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == str(["chat m", "invoke_agent toolcall", "step 1"])


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # closed again when the socket is


def run_program(
    tmp_path: Path, *args: str, program: str = "main.py", cwd: Path | None = None
) -> tuple[subprocess.CompletedProcess[str], float]:
    """One of our programs (``program``: a file in the repository, or ``-m module``), run to
    its end with no stdin; its result and how long it took."""
    argv = program.split() if program.startswith("-m ") else [str(ROOT / program)]
    started = time.monotonic()
    out = subprocess.run(
        [sys.executable, *argv, *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=child_env(tmp_path),
        cwd=cwd or tmp_path,
        timeout=120,
    )
    return out, time.monotonic() - started


@pytest.mark.e2e
def test_an_endpoint_that_is_down_costs_one_warning_and_no_waiting(llm_server, tmp_path):
    endpoint = f"http://127.0.0.1:{closed_port()}"
    config = write_config(tmp_path, llm_server.base_url)
    with config.open("a") as f:
        f.write(f'[tracing]\nendpoint = "{endpoint}"\nexport_timeout = 1.0\n')
    reply = tool_calls(call("terminate", {"status": "success"}), content="done")
    times: dict[str, float] = {}
    for mode in ("plain", "traced"):
        llm_server.push(reply)
        flags = ["--trace"] if mode == "traced" else []
        out, times[mode] = run_program(
            tmp_path, "-c", str(config), "-p", "say done", "--no-session", *flags
        )
        assert out.returncode == 0, out.stderr
        if mode == "traced":
            warnings = [line for line in out.stderr.splitlines() if "Tracing:" in line]
            assert len(warnings) == 1, out.stderr
            assert endpoint in warnings[0]
            assert "Traceback" not in out.stderr and "retrying" not in out.stderr
    # Importing the SDK and the exporter, plus at most the exit's bounded wait (1 s).
    assert times["traced"] - times["plain"] < 2.5, times


# ---- a real backend: Arize Phoenix ------------------------------------------------------------


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Phoenix]:
    """One Phoenix for the module's tests (its start-up is the slow part)."""
    with start_phoenix(tmp_path_factory.mktemp("phoenix")) as server:
        yield server


def wait_for_spans(phoenix: Phoenix, project: str, done: Any) -> list[dict[str, Any]]:
    """Phoenix's spans of ``project`` once ``done(spans)`` holds: it stores what it received
    in the background, so the API may lag the program's exit by a moment (bounded here)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            spans = phoenix.spans(project)
        except urllib.error.HTTPError as e:  # 404: the project exists with its first span
            if e.code != 404:
                raise
            spans = []
        if done(spans) or time.monotonic() > deadline:
            return spans
        time.sleep(0.2)


def traced_config(tmp_path: Path, base_url: str, phoenix: Phoenix, service: str, **extra: str):
    config = write_config(tmp_path, base_url)
    lines = [f'endpoint = "{phoenix.endpoint}"', f'service_name = "{service}"']
    lines += [f"{k} = {v}" for k, v in extra.items()]
    with config.open("a") as f:
        f.write("[tracing]\n" + "\n".join(lines) + "\n")
    return config


def session_usage(workspace: Path) -> dict[str, int]:
    """The run's usage as the session file recorded it."""
    (path,) = (workspace / ".sessions").glob("*.jsonl")
    records = [json.loads(line) for line in path.read_text().splitlines()]
    finished = [
        r["event"]
        for r in records
        if r.get("type") == "event" and r["event"]["kind"] == "run_finished"
    ]
    return finished[-1]["usage"]


@pytest.mark.e2e
def test_a_manus_run_seen_in_phoenix(phoenix: Phoenix, llm_server, tmp_path):
    """main.py --trace: Phoenix receives the run over OTLP; its REST API gives back the tree,
    the token counts of the session, and the failed tool call as an error."""
    llm_server.push(
        tool_calls(
            call("python_execute", {"code": "print(6 * 7)"}, id="ok"),
            call("str_replace_editor", {"command": "view", "path": "/nonexistent/x"}, id="bad"),
            content="Checking.",
            usage={"prompt_tokens": 120, "completion_tokens": 30},
        ),
        tool_calls(
            call("terminate", {"status": "success"}, id="end"),
            content="42",
            usage={"prompt_tokens": 200, "completion_tokens": 10},
        ),
    )
    workspace = tmp_path / "ws"
    workspace.mkdir()
    config = traced_config(tmp_path, llm_server.base_url, phoenix, "t-main")
    out, _ = run_program(tmp_path, "-c", str(config), "-w", str(workspace), "-p", "6*7?", "--trace")
    assert out.returncode == 0, out.stderr
    assert "Tracing:" not in out.stderr  # delivered: no warning

    spans = wait_for_spans(phoenix, "t-main", lambda s: len(s) >= 8)
    by_id = {s["context"]["span_id"]: s for s in spans}
    (run,) = [s for s in spans if s["parent_id"] is None]
    assert run["name"] == "invoke_agent Manus" and run["span_kind"] == "AGENT"
    steps = sorted((s for s in spans if s["name"].startswith("step ")), key=lambda s: s["name"])
    assert [s["name"] for s in steps] == ["step 1", "step 2"]
    assert all(s["parent_id"] == run["context"]["span_id"] for s in steps)
    chats = [s for s in spans if s["span_kind"] == "LLM"]
    tools = {s["attributes"]["gen_ai.tool.call.id"]: s for s in spans if s["span_kind"] == "TOOL"}
    assert len(chats) == 2 and set(tools) == {"ok", "bad", "end"}
    for span in chats + list(tools.values()):
        assert by_id[span["parent_id"]]["name"].startswith("step ")
    assert len({s["context"]["trace_id"] for s in spans}) == 1

    usage = session_usage(workspace)
    assert usage["prompt_tokens"] == 320 and usage["completion_tokens"] == 40
    attrs = [c["attributes"] for c in chats]
    assert sum(a["gen_ai.usage.input_tokens"] for a in attrs) == usage["prompt_tokens"]
    assert sum(a["gen_ai.usage.output_tokens"] for a in attrs) == usage["completion_tokens"]
    assert run["attributes"]["gen_ai.usage.input_tokens"] == usage["prompt_tokens"]
    assert {a["gen_ai.request.model"] for a in attrs} == {"gpt-4o-mini"}

    assert tools["bad"]["status_code"] == "ERROR"
    assert [e["name"] for e in tools["bad"]["events"]] == ["exception"]
    assert tools["ok"]["status_code"] != "ERROR" and tools["end"]["status_code"] != "ERROR"
    assert tools["ok"]["attributes"]["gen_ai.tool.name"] == "python_execute"
    assert "input.value" not in run["attributes"]  # contents are opt-in


@pytest.mark.e2e
def test_a_flow_and_a_batch_seen_in_phoenix(phoenix: Phoenix, llm_server, tmp_path):
    """run_flow.py --trace: flow > plan step > agent run; a batch with [tracing] enabled:
    a span per task around its run."""
    llm_server.push(
        tool_calls(
            call("planning", {"command": "create", "plan_id": "p", "title": "T", "steps": ["hi"]})
        ),
        tool_calls(call("terminate", {"status": "success"}), content="said hi"),
        text("All done."),
    )
    config = traced_config(tmp_path, llm_server.base_url, phoenix, "t-flow")
    flow, _ = run_program(
        tmp_path, "-c", str(config), "-p", "greet", "--trace", program="run_flow.py"
    )
    assert flow.returncode == 0, flow.stderr

    batch_dir = tmp_path / "batch"
    batch_dir.mkdir()
    tasks = batch_dir / "tasks.jsonl"
    tasks.write_text(
        "".join(
            json.dumps({"id": f"t{i}", "prompt": f"say {i}", "agent": "toolcall"}) + "\n"
            for i in range(2)
        )
    )
    llm_server.push(text("0"), text("1"))
    batch_config = traced_config(batch_dir, llm_server.base_url, phoenix, "t-batch", enabled="true")
    batch, _ = run_program(
        tmp_path,
        *(str(tasks), "-o", str(batch_dir / "out.jsonl"), "-c", str(batch_config)),
        *("-j", "1", "--no-progress"),
        program="-m app.batch",
        cwd=ROOT,
    )
    assert batch.returncode == 0, batch.stderr

    spans = wait_for_spans(
        phoenix, "t-flow", lambda s: any(x["parent_id"] is None for x in s) and len(s) >= 5
    )
    by_id = {s["context"]["span_id"]: s for s in spans}
    (root,) = [s for s in spans if s["parent_id"] is None]
    assert root["name"].startswith("flow ")
    (plan_step,) = [s for s in spans if s["name"] == "plan step 0"]
    assert plan_step["parent_id"] == root["context"]["span_id"]
    assert plan_step["attributes"]["gen_ai.agent.name"] == "Manus"
    (run,) = [s for s in spans if s["name"] == "invoke_agent Manus"]
    assert by_id[run["parent_id"]]["name"] == "plan step 0"

    spans = wait_for_spans(phoenix, "t-batch", lambda s: len(s) >= 8)
    by_id = {s["context"]["span_id"]: s for s in spans}
    roots = sorted(s["name"] for s in spans if s["parent_id"] is None)
    assert roots == ["batch task t0", "batch task t1"]
    runs = [s for s in spans if s["name"] == "invoke_agent toolcall"]
    assert sorted(by_id[r["parent_id"]]["name"] for r in runs) == roots


@pytest.mark.e2e
def test_an_mcp_tool_call_carries_its_server_in_phoenix(phoenix: Phoenix, llm_server, tmp_path):
    """run_mcp.py --trace against our own MCP server (stdio): its tool calls name it."""
    llm_server.push(
        tool_calls(call("mcp_openmanus_bash", {"command": "echo traced"}, id="b")),
        tool_calls(call("mcp_openmanus_terminate", {"status": "success"}, id="t"), content="ok"),
    )
    config = traced_config(tmp_path, llm_server.base_url, phoenix, "t-mcp")
    out, _ = run_program(
        tmp_path, "--config", str(config), "-p", "echo", "--trace", program="run_mcp.py"
    )
    assert out.returncode == 0, out.stderr
    spans = wait_for_spans(
        phoenix, "t-mcp", lambda s: sum(x["span_kind"] == "TOOL" for x in s) >= 2
    )
    tools = {s["attributes"]["gen_ai.tool.call.id"]: s for s in spans if s["span_kind"] == "TOOL"}
    assert tools["b"]["attributes"]["mcp.server.name"] == "openmanus"
    assert tools["b"]["attributes"]["gen_ai.tool.name"] == "mcp_openmanus_bash"
    assert tools["b"]["status_code"] != "ERROR"


@pytest.mark.e2e
def test_a_hostile_run_stored_by_phoenix_holds_no_key(phoenix: Phoenix, llm_server, tmp_path):
    """The hostile model of tests/hostile_model.py (the key in its text, tool names, call ids,
    arguments and finish reasons, raw and encoded), contents on: what Phoenix stored and
    serves back has the key nowhere (tests/test_tracing_redaction.py checks the bytes)."""
    llm_server.push(hostile_turn(), final_turn())
    extra = f'[tracing]\nendpoint = "{phoenix.endpoint}"\nservice_name = "t-hostile"\n'
    config = hostile_config(tmp_path, llm_server.base_url, extra + "record_content = true\n")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    out, _ = run_program(tmp_path, "-c", str(config), "-w", str(workspace), "-p", "go", "--trace")
    assert out.returncode == 0, out.stderr
    spans = wait_for_spans(
        phoenix,
        "t-hostile",
        lambda s: (
            any(x["parent_id"] is None for x in s) and sum(x["span_kind"] == "TOOL" for x in s) >= 4
        ),
    )
    tools = {s["name"] for s in spans if s["span_kind"] == "TOOL"}
    assert tools == {
        "execute_tool ***",
        "execute_tool str_replace_editor",
        "execute_tool bash",
        "execute_tool terminate",
    }, tools
    assert leaks(json.dumps(spans)) == []
