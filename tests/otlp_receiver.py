"""An OTLP/HTTP trace receiver on 127.0.0.1 for the tests: it takes what an exporter sends
(``POST /v1/traces``, protobuf, plain or gzip/deflate), keeps every body as received and
decodes it with the protocol's own classes (``opentelemetry-proto``).

What a test asserts on is what really left the program: the bytes on the wire, and the spans
as any backend would read them.
"""

from __future__ import annotations

import gzip
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

__all__ = ["OtlpReceiver", "ReceivedSpan"]


@dataclass
class ReceivedSpan:
    """One span as a backend reads it: attributes and events decoded to Python values."""

    name: str
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]
    status_code: int  # 0 unset, 1 ok, 2 error (the protocol's numbers)
    status_message: str
    span_id: bytes
    parent_id: bytes
    resource: dict[str, Any] = field(default_factory=dict)

    def texts(self) -> list[str]:
        """Every string the span carries: its name, keys, values, events and status."""
        out = [self.name, self.status_message]
        for attributes in [self.attributes, self.resource, *(a for _, a in self.events)]:
            out += list(attributes)
            out += [str(v) for v in attributes.values()]
        out += [name for name, _ in self.events]
        return out


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, kind) if kind else None


def _attributes(items: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in items}


class OtlpReceiver:
    """``with OtlpReceiver() as receiver:`` a running receiver; ``receiver.url`` is the
    endpoint to configure (the exporter adds ``/v1/traces``)."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self._spans: list[ReceivedSpan] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                encoding = (self.headers.get("Content-Encoding") or "").lower()
                if encoding == "gzip":
                    body = gzip.decompress(body)
                elif encoding == "deflate":
                    body = zlib.decompress(body)
                if self.path != "/v1/traces":
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                receiver._take(body)
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def _take(self, body: bytes) -> None:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        spans = []
        for resource_spans in request.resource_spans:
            resource = _attributes(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    spans.append(
                        ReceivedSpan(
                            name=span.name,
                            attributes=_attributes(span.attributes),
                            events=[(e.name, _attributes(e.attributes)) for e in span.events],
                            status_code=int(span.status.code),
                            status_message=span.status.message,
                            span_id=span.span_id,
                            parent_id=span.parent_span_id,
                            resource=resource,
                        )
                    )
        with self._lock:
            self.bodies.append(body)
            self._spans += spans

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    @property
    def spans(self) -> list[ReceivedSpan]:
        with self._lock:
            return list(self._spans)

    def wait_for(
        self, done: Callable[[list[ReceivedSpan]], bool], timeout: float = 30.0
    ) -> list[ReceivedSpan]:
        """The spans received once ``done(spans)`` holds (polled until ``timeout``)."""
        deadline = time.monotonic() + timeout
        while True:
            spans = self.spans
            if done(spans) or time.monotonic() > deadline:
                return spans
            time.sleep(0.05)  # polls an observable condition; noqa: sleep-ok

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(5)
