"""OpenTelemetry traces of runs, made from the event bus (the ``otel`` extra; docs/tracing.md).

Each agent run is one trace: a span for the run, each step, each model call and each tool
call, named and attributed after the OpenTelemetry GenAI semantic conventions (plus
OpenInference's span kinds and token counts, which Phoenix shows). A flow adds its plan steps,
a batch its tasks. Prompts, answers, tool arguments and results are recorded only with
``[tracing] record_content = true``; without it an error says only its type and HTTP status.
Every span name, attribute, event and status passes the outward redactor
(:mod:`app.redaction`) on its way to the tracer, whoever's provider that is.

This module is imported only when tracing is on (``[tracing] enabled``, ``--trace``): with it
off nothing from opentelemetry is loaded and a step costs what it did.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from opentelemetry import trace as otel
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import Link, Span, SpanContext, SpanKind, Status, StatusCode, Tracer
from opentelemetry.util.types import AnyValue, Attributes, AttributeValue

from app import __version__
from app.config import TracingSettings, config
from app.events import (
    Compacted,
    ErrorEvent,
    Event,
    EventBus,
    PlanChanged,
    RunFinished,
    RunStarted,
    StepFinished,
    StepStarted,
    Thought,
    ToolCallEvent,
    ToolResultEvent,
    UsageReport,
)
from app.logger import logger, register_secret
from app.redaction import redact_text

#: The instrumentation scope our spans carry.
SCOPE = "openmanus"
#: The exporter's own logger: its retries would print a line each; we warn once instead.
_EXPORTER_LOGGER = "opentelemetry.exporter.otlp.proto.http.trace_exporter"

_lock = threading.Lock()
_own: tuple[TracerProvider, BatchSpanProcessor, _OnceWarningExporter] | None = None


class _OnceWarningExporter(SpanExporter):
    """The OTLP exporter, failing quietly: a batch it cannot deliver is dropped, and the
    first such failure is logged as one warning (a backend down must not flood the output)."""

    def __init__(self, inner: SpanExporter, endpoint: str, timeout: float) -> None:
        self.inner = inner
        self.endpoint = endpoint
        self.timeout = timeout
        self.failing = False
        self._warned = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self.inner.export(spans)
        except Exception:  # an exporter bug must not reach the run either
            result = SpanExportResult.FAILURE
        self.failing = result is not SpanExportResult.SUCCESS
        if self.failing and not self._warned:
            self._warned = True
            logger.warning(
                f"Tracing: could not send spans to {self.endpoint}; they are dropped "
                "(is the trace backend running? this warning is shown once)"
            )
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def _endpoint(settings: TracingSettings) -> str:
    """The traces URL: the setting, else the standard variables, else localhost:4318."""
    base = settings.endpoint
    if not base:
        explicit = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
        if explicit:
            return explicit
        base = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip() or "http://localhost:4318"
    base = base.rstrip("/")
    return base if base.endswith("/v1/traces") else f"{base}/v1/traces"


def _make_provider(
    settings: TracingSettings,
) -> tuple[TracerProvider, BatchSpanProcessor, _OnceWarningExporter]:
    name = settings.service_name or os.environ.get("OTEL_SERVICE_NAME") or "openmanus"
    # Phoenix files spans by project: one per service.
    resource = Resource.create(
        {"service.name": name, "service.version": __version__, "openinference.project.name": name}
    )
    endpoint = _endpoint(settings)
    for value in settings.headers.values():  # API keys of hosted backends stay out of logs
        register_secret(value)
    logging.getLogger(_EXPORTER_LOGGER).addFilter(lambda record: False)
    exporter = _OnceWarningExporter(
        OTLPSpanExporter(
            endpoint=endpoint, timeout=settings.export_timeout, headers=settings.headers or None
        ),
        endpoint,
        settings.export_timeout,
    )
    processor = BatchSpanProcessor(exporter)
    provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    provider.add_span_processor(processor)
    return provider, processor, exporter


def _settings(settings: TracingSettings | None) -> TracingSettings:
    if settings is not None:
        return settings
    return config.tracing if config.is_loaded else TracingSettings()


def get_tracer(settings: TracingSettings | None = None) -> RedactingTracer:
    """Our tracer, redacting: from the tracer provider the application set up when there is
    one (used as it is, never replaced), else from one exporting over OTLP/HTTP, made once."""
    global _own
    current = otel.get_tracer_provider()
    if not isinstance(current, otel.ProxyTracerProvider):  # the application's own
        return redacting(current.get_tracer(SCOPE, __version__))
    with _lock:
        if _own is None:
            _own = _make_provider(_settings(settings))
            atexit.register(shutdown)
        return redacting(_own[0].get_tracer(SCOPE, __version__))


def shutdown(timeout: float | None = None) -> None:
    """Send the spans still queued and stop our exporter, waiting at most ``timeout``
    seconds (default: ``export_timeout``); nothing to do when the application owns the
    provider. Spans for a backend that already failed are dropped without waiting."""
    global _own
    with _lock:
        own, _own = _own, None
    if own is None:
        return
    _provider, processor, exporter = own
    limit = timeout if timeout is not None else exporter.timeout
    if not exporter.failing:
        flusher = threading.Thread(target=processor.force_flush, daemon=True)
        flusher.start()
        flusher.join(limit)
    exporter.shutdown()  # aborts retries still waiting
    closer = threading.Thread(target=processor.shutdown, daemon=True)
    closer.start()
    closer.join(0.5)


# ---- redaction -------------------------------------------------------------------------------


def _clean(value: AnyValue) -> AnyValue:
    """An attribute value redacted: strings (and bytes) of any nesting, mapping keys too."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, bytes):
        return redact_text(value.decode("utf-8", "replace")).encode("utf-8")
    if isinstance(value, Mapping):
        return {redact_text(str(k)): _clean(v) for k, v in value.items()}
    if isinstance(value, Sequence):
        return [_clean(v) for v in value]
    return value


def _cleaned(attributes: Attributes) -> dict[str, AnyValue] | None:
    if attributes is None:
        return None
    return {redact_text(key): _clean(value) for key, value in attributes.items()}


class RedactedSpan(Span):
    """A span whose name, attributes, events, links and status pass the outward redactor
    before the span (the SDK's, or the application's own) sees them."""

    def __init__(self, inner: Span) -> None:
        self.inner = inner

    def end(self, end_time: int | None = None) -> None:
        self.inner.end(end_time)

    def get_span_context(self) -> SpanContext:
        return self.inner.get_span_context()

    def set_attributes(self, attributes: Mapping[str, AttributeValue]) -> None:
        self.inner.set_attributes(_cleaned(attributes) or {})

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        self.inner.set_attribute(redact_text(key), _clean(value))

    def add_event(
        self, name: str, attributes: Attributes = None, timestamp: int | None = None
    ) -> None:
        self.inner.add_event(redact_text(name), _cleaned(attributes), timestamp)

    def add_link(self, context: SpanContext, attributes: Attributes = None) -> None:
        self.inner.add_link(context, _cleaned(attributes))

    def update_name(self, name: str) -> None:
        self.inner.update_name(redact_text(name))

    def is_recording(self) -> bool:
        return self.inner.is_recording()

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        if isinstance(status, Status):
            text = status.description
            status = Status(status.status_code, redact_text(text) if text else text)
        self.inner.set_status(status, redact_text(description) if description else description)

    def record_exception(
        self,
        exception: BaseException,
        attributes: Attributes = None,
        timestamp: int | None = None,
        escaped: bool = False,
    ) -> None:
        """The exception's type and redacted message (no stack trace: its lines are code and
        values nobody redacted)."""
        event = {
            "exception.type": type(exception).__name__,
            "exception.message": str(exception),
            "exception.escaped": str(escaped),
            **(attributes or {}),
        }
        self.add_event("exception", event, timestamp)


class RedactingTracer(Tracer):
    """A tracer (any provider's) whose spans are :class:`RedactedSpan`."""

    def __init__(self, inner: Tracer) -> None:
        self.inner = inner

    def start_span(
        self,
        name: str,
        context: Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
    ) -> Span:
        if links:
            links = [Link(link.context, _cleaned(link.attributes)) for link in links]
        span = self.inner.start_span(
            redact_text(name),
            context,
            kind,
            _cleaned(attributes),
            links,
            start_time,
            record_exception,
            set_status_on_exception,
        )
        return RedactedSpan(span)

    # The API types this with its own private context-manager decorator.
    @contextlib.contextmanager
    def start_as_current_span(  # type: ignore[override]
        self,
        name: str,
        context: Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
        end_on_exit: bool = True,
    ) -> Iterator[Span]:
        span = self.start_span(name, context, kind, attributes, links, start_time)
        with otel.use_span(span, end_on_exit, record_exception, set_status_on_exception):
            yield span


def redacting(tracer: Tracer) -> RedactingTracer:
    """``tracer`` with every span it makes redacted (as it is when it already is)."""
    return tracer if isinstance(tracer, RedactingTracer) else RedactingTracer(tracer)


# ---- the spans -----------------------------------------------------------------------------------


class RunTracer:
    """A listener turning one event stream (an agent's or a flow's) into spans.

    ``tracer`` is used through :func:`redacting`; ``agents`` maps agent names to agents, to
    find which MCP server a tool call went to; ``parent`` is the context runs start under (a
    batch task's span), else each run is the root of its own trace."""

    #: Records without showing: the run streams and logs as if nobody listened.
    passive = True

    def __init__(
        self,
        tracer: Tracer,
        settings: TracingSettings,
        agents: Mapping[str, Any] | None = None,
        parent: Context | None = None,
    ) -> None:
        self.tracer = redacting(tracer)
        self.content = settings.record_content
        self.max_chars = settings.max_content_chars
        self.agents = dict(agents or {})
        self.parent = parent
        self._runs: dict[str, Span] = {}
        self._steps: dict[str, Span] = {}
        #: Tool calls asked for and not answered yet: call id -> (agent, when, attributes).
        self._tools: dict[str, tuple[str, int, dict[str, Any]]] = {}
        #: A model call's span stays open (with its end time fixed) until its answer is known.
        self._model: dict[str, tuple[Span, int, list[dict[str, Any]]]] = {}
        self._flow: Span | None = None
        self._plan_step: Span | None = None

    # ---- helpers --------------------------------------------------------------------------------

    def _text(self, text: str | None) -> str:
        text = redact_text(text or "")
        if len(text) > self.max_chars:
            text = text[: self.max_chars] + f"... [{len(text) - self.max_chars} more chars]"
        return text

    def _record(self, span: Span, key: str, text: str | None) -> None:
        """Content attributes only when the user opted in; always redacted."""
        if self.content and text:
            span.set_attribute(key, self._text(text))

    def _context_for(self, source: str) -> Context | None:
        span = self._steps.get(source) or self._runs.get(source)
        return otel.set_span_in_context(span) if span is not None else self.parent

    def _error(self, span: Span, kind: str, message: str, status_code: int | None = None) -> None:
        """An error status and event: the message when contents are recorded, else only the
        type and HTTP status (a model server's error may quote the prompt)."""
        text = self._text(message) if self.content else _summary(kind, status_code)
        span.set_status(Status(StatusCode.ERROR, text or kind))
        span.add_event("exception", {"exception.type": kind, "exception.message": text})

    def _finish_model(self, source: str) -> None:
        pending = self._model.pop(source, None)
        if pending is None:
            return
        span, end, calls = pending
        if calls and self.content:
            span.set_attribute("gen_ai.output.tool_calls", json.dumps(calls, ensure_ascii=False))
        span.end(end_time=end)

    def _mcp_server(self, source: str, tool: str) -> str | None:
        agent = self.agents.get(source)
        tools = getattr(getattr(agent, "available_tools", None), "tool_map", None) or {}
        server = getattr(tools.get(tool), "server_id", None)
        return server if isinstance(server, str) and server else None

    # ---- events ---------------------------------------------------------------------------------

    def __call__(self, event: Event) -> None:
        handler = self._HANDLERS.get(type(event))
        if handler is not None:
            handler(self, event)

    def _run_started(self, event: RunStarted) -> None:
        self._end_run(event.source)  # a run that never said it ended
        parent = otel.set_span_in_context(self._plan_step) if self._plan_step else self.parent
        span = self.tracer.start_span(
            f"invoke_agent {event.source}",
            context=parent or Context(),
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": event.source,
                "openmanus.max_steps": event.max_steps,
                "openmanus.resumed": event.resumed,
                "openinference.span.kind": "AGENT",
            },
        )
        self._record(span, "input.value", event.prompt)
        self._runs[event.source] = span

    def _step_started(self, event: StepStarted) -> None:
        self._end_step(event.source)
        run = self._runs.get(event.source)
        parent = otel.set_span_in_context(run) if run is not None else self.parent
        self._steps[event.source] = self.tracer.start_span(
            f"step {event.step}",
            context=parent or Context(),
            attributes={
                "openmanus.step": event.step,
                "gen_ai.agent.name": event.source,
                "openinference.span.kind": "CHAIN",
            },
        )

    def _usage(self, event: UsageReport) -> None:
        self._finish_model(event.source)
        usage = event.usage
        now = time.time_ns()
        start = now - int((event.duration or 0.0) * 1e9)
        model = event.model or "model"
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": model,
            "gen_ai.agent.name": event.source,
            "openinference.span.kind": "LLM",
            "llm.model_name": model,
        }
        if event.finish_reason:
            attributes["gen_ai.response.finish_reasons"] = [event.finish_reason]
        if usage is not None:
            attributes.update(
                {
                    "gen_ai.usage.input_tokens": usage.prompt_tokens,
                    "gen_ai.usage.output_tokens": usage.completion_tokens,
                    "llm.token_count.prompt": usage.prompt_tokens,
                    "llm.token_count.completion": usage.completion_tokens,
                    "llm.token_count.total": usage.total_tokens,
                }
            )
            if usage.cached_tokens:
                attributes["gen_ai.usage.cache_read.input_tokens"] = usage.cached_tokens
            if usage.estimated:
                attributes["openmanus.usage.estimated"] = True
        if event.cost is not None:
            attributes["openmanus.cost"] = event.cost
        if event.source not in self._runs:  # the flow's own call: planning or its summary
            flow = otel.set_span_in_context(self._flow_span(event.source))
            span = self.tracer.start_span(
                f"chat {model}", flow, SpanKind.CLIENT, attributes, start_time=start
            )
            span.end(end_time=now)
            return
        span = self.tracer.start_span(
            f"chat {model}",
            context=self._context_for(event.source) or Context(),
            kind=SpanKind.CLIENT,
            attributes=attributes,
            start_time=start,
        )
        self._model[event.source] = (span, now, [])

    def _thought(self, event: Thought) -> None:
        pending = self._model.get(event.source)
        if pending is not None:
            self._record(pending[0], "output.value", event.text)

    def _tool_call(self, event: ToolCallEvent) -> None:
        pending = self._model.get(event.source)
        if pending is not None:
            pending[2].append({"id": event.call_id, "name": event.name})
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": event.name,
            "gen_ai.tool.call.id": event.call_id,
            "gen_ai.tool.type": "function",
            "gen_ai.agent.name": event.source,
            "openinference.span.kind": "TOOL",
            "tool.name": event.name,
        }
        server = self._mcp_server(event.source, event.name)
        if server is not None:
            attributes["mcp.server.name"] = server
        if self.content and event.arguments:
            attributes["gen_ai.tool.call.arguments"] = attributes["input.value"] = self._text(
                event.arguments
            )
        self._tools[event.call_id] = (event.source, time.time_ns(), attributes)

    def _tool_span(self, call_id: str, duration: float | None = None) -> Span | None:
        """The span of a call, made when it is answered: it started ``duration`` ago (calls
        of one reply may wait for each other), else when the model asked for it."""
        pending = self._tools.pop(call_id, None)
        if pending is None:
            return None
        source, asked, attributes = pending
        start = asked if duration is None else max(asked, time.time_ns() - int(duration * 1e9))
        return self.tracer.start_span(
            f"execute_tool {attributes['gen_ai.tool.name']}",
            context=self._context_for(source) or Context(),
            attributes=attributes,
            start_time=start,
        )

    def _tool_result(self, event: ToolResultEvent) -> None:
        self._finish_model(event.source)
        span = self._tool_span(event.call_id, event.duration)
        if span is None:
            return
        self._record(span, "gen_ai.tool.call.result", event.output)
        self._record(span, "output.value", event.output)
        if event.error:
            self._error(span, "ToolError", event.output)
        span.end()

    def _step_finished(self, event: StepFinished) -> None:
        self._finish_model(event.source)
        span = self._steps.get(event.source)
        if span is not None:
            self._record(span, "output.value", event.result)
        self._end_step(event.source)

    def _compacted(self, event: Compacted) -> None:
        span = self._steps.get(event.source) or self._runs.get(event.source)
        if span is not None:
            span.add_event(
                "compaction",
                {"before_tokens": event.before_tokens, "after_tokens": event.after_tokens},
            )

    def _error_event(self, event: ErrorEvent) -> None:
        self._finish_model(event.source)
        span = self._steps.get(event.source) or self._runs.get(event.source)
        if span is not None:
            self._error(span, event.error_type or "Error", event.message, _status_in(event.message))

    def _run_finished(self, event: RunFinished) -> None:
        span = self._runs.get(event.source)
        if span is not None:
            if event.usage is not None:
                span.set_attribute("gen_ai.usage.input_tokens", event.usage.prompt_tokens)
                span.set_attribute("gen_ai.usage.output_tokens", event.usage.completion_tokens)
            if event.cost is not None:
                span.set_attribute("openmanus.cost", event.cost)
            span.set_attribute("openmanus.steps", event.steps)
            span.set_attribute("openmanus.state", event.state)
            span.set_attribute("openmanus.stop_reason", event.stop_reason or "interrupted")
            self._record(span, "output.value", event.final_answer)
            if event.state == "ERROR":
                error = event.result.error if event.result is not None else None
                kind = type(error).__name__ if error is not None else event.stop_reason
                code = getattr(error, "status_code", None)
                self._error(span, kind or "Error", event.failure or "the run failed", code)
        self._end_run(event.source)

    def _flow_span(self, source: str) -> Span:
        if self._flow is None:
            self._flow = self.tracer.start_span(
                f"flow {source}",
                context=self.parent or Context(),
                attributes={"openinference.span.kind": "CHAIN", "openmanus.flow": source},
            )
        return self._flow

    def _plan(self, event: PlanChanged) -> None:
        flow = self._flow_span(event.source)
        if event.change == "plan_created":
            flow.set_attribute("openmanus.plan.id", event.plan_id)
            flow.set_attribute("openmanus.plan.total_steps", event.total_steps)
            self._record(flow, "input.value", event.plan_text)
        elif event.change == "step_started":
            self._end_plan_step()
            self._plan_step = self.tracer.start_span(
                f"plan step {event.step_index}",
                context=otel.set_span_in_context(flow),
                attributes={
                    "openmanus.plan.step_index": event.step_index or 0,
                    "gen_ai.agent.name": event.agent or "",
                    "openinference.span.kind": "CHAIN",
                },
            )
            self._record(self._plan_step, "input.value", event.step)
        elif event.change == "step_finished" and self._plan_step is not None:
            self._plan_step.set_attribute("openmanus.plan.status", event.status or "")
            if event.status != "completed":
                self._error(self._plan_step, "StepBlocked", event.note or "the step was blocked")
            self._end_plan_step()
        elif event.change == "summary":
            self._record(flow, "output.value", event.note)
            self.close()

    _HANDLERS: dict[type[Event], Callable[[RunTracer, Any], None]] = {
        RunStarted: _run_started,
        StepStarted: _step_started,
        UsageReport: _usage,
        Thought: _thought,
        ToolCallEvent: _tool_call,
        ToolResultEvent: _tool_result,
        StepFinished: _step_finished,
        Compacted: _compacted,
        ErrorEvent: _error_event,
        RunFinished: _run_finished,
        PlanChanged: _plan,
    }

    # ---- ending ---------------------------------------------------------------------------------

    def _end_step(self, source: str) -> None:
        self._finish_model(source)
        for call_id, (agent, _, _) in list(self._tools.items()):
            span = self._tool_span(call_id) if agent == source else None
            if span is not None:  # asked for, never answered (the run was cut short)
                span.set_attribute("openmanus.unanswered", True)
                span.end()
        step = self._steps.pop(source, None)
        if step is not None:
            step.end()

    def _end_run(self, source: str) -> None:
        self._end_step(source)
        run = self._runs.pop(source, None)
        if run is not None:
            run.end()

    def _end_plan_step(self) -> None:
        if self._plan_step is not None:
            self._plan_step.end()
            self._plan_step = None

    def close(self) -> None:
        """End every span still open (a run cut short), innermost first."""
        for source in list(self._runs) + list(self._steps):
            self._end_run(source)
        self._end_plan_step()
        if self._flow is not None:
            self._flow.end()
            self._flow = None


#: How our model errors give the server's status, before the server's own text.
_HTTP_STATUS = re.compile(r"\(HTTP (\d{3})\)")


def _status_in(message: str) -> int | None:
    """The HTTP status an error event's message gives (``... (HTTP 400): ...``), if any."""
    found = _HTTP_STATUS.search(message)
    return int(found.group(1)) if found else None


def _summary(kind: str, status_code: int | None) -> str:
    """An error without its text: ``LLMBadRequestError (HTTP 400)``."""
    return f"{kind} (HTTP {status_code})" if status_code else kind


def _agents_of(target: Any) -> dict[str, Any]:
    agents = getattr(target, "agents", None)
    if isinstance(agents, Mapping):
        return {str(getattr(a, "name", key)): a for key, a in agents.items()}
    name = getattr(target, "name", None)
    return {name: target} if isinstance(name, str) else {}


def trace(
    target: Any,
    *,
    parent: Context | None = None,
    settings: TracingSettings | None = None,
) -> Callable[[], None]:
    """Trace the runs of ``target`` (an agent, a flow, or an ``EventBus``) from now on;
    returns a function that stops and ends the spans still open.

    >>> stop = trace(agent)  # doctest: +SKIP
    """
    chosen = _settings(settings)
    bus = target if isinstance(target, EventBus) else target.events
    listener = RunTracer(get_tracer(chosen), chosen, _agents_of(target), parent)
    unsubscribe = bus.subscribe(listener)

    def stop() -> None:
        unsubscribe()
        listener.close()

    return stop


@contextlib.contextmanager
def task_span(
    name: str, attributes: Mapping[str, Any] | None = None, settings: TracingSettings | None = None
) -> Iterator[tuple[Context, Span]]:
    """A span around one batch task; its context is the ``parent`` of the task's runs."""
    span = get_tracer(settings).start_span(
        name,
        context=Context(),
        attributes={"openinference.span.kind": "CHAIN", **(attributes or {})},
    )
    try:
        yield otel.set_span_in_context(span), span
    finally:
        span.end()
