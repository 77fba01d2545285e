"""A real OTLP/HTTP trace receiver: ``POST /v1/traces`` bodies decoded with opentelemetry-proto.

It is an HTTP server on 127.0.0.1 in a thread of the test process (``http.server``), so BooCode in
the test process and the processes a test starts (Daphne, the hub worker) export to it alike.
Every request is parsed as an ``ExportTraceServiceRequest`` (protobuf, gunzipped when the exporter
compresses) and answered with an empty ``ExportTraceServiceResponse``; a body that does not parse
gets 400 and is counted in ``refused``. The spans are kept as :class:`Span` (ids in hex, as W3C
``traceparent`` writes them) and a test waits for them with :meth:`OtlpReceiver.wait_for`.

    with OtlpReceiver() as receiver:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.url
        ...
        spans = receiver.wait_for(lambda spans: any(s.name == "turn" for s in spans))

In the test process, ``with exporting(receiver):`` turns tracing on as an operator would (the
standard variable, :func:`mcpclient.telemetry.tracing.configure`) and off again after.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as SpanMessage

from mcpclient.telemetry import tracing

KINDS = {value: name.removeprefix("SPAN_KIND_").lower() for name, value in SpanMessage.SpanKind.items()}


@dataclass(frozen=True)
class Span:
    """One span as the receiver decoded it."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str  # "" for a root span
    kind: str  # internal, client, server, producer, consumer
    attributes: dict[str, Any]
    resource: dict[str, Any]  # its resource's attributes (service.name, boocode.process, ...)
    error: bool  # its status is ERROR
    events: tuple[str, ...]


def _value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which == "array_value":
        return tuple(_value(item) for item in value.array_value.values)
    if which == "kvlist_value":
        return _attributes(value.kvlist_value.values)
    return getattr(value, which) if which else None


def _attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs if isinstance(pair, KeyValue)}


def decode(body: bytes) -> list[Span]:
    """The spans of one ``ExportTraceServiceRequest`` (raises ``DecodeError`` on anything else)."""
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    spans = []
    for resource_spans in request.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(
                    Span(
                        name=span.name,
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_id=span.parent_span_id.hex(),
                        kind=KINDS.get(span.kind, str(span.kind)),
                        attributes=_attributes(span.attributes),
                        resource=resource,
                        error=span.status.code == span.status.STATUS_CODE_ERROR,
                        events=tuple(event.name for event in span.events),
                    )
                )
    return spans


class OtlpReceiver:
    """The receiver (see the module docstring); ``url`` is what ``OTEL_EXPORTER_OTLP_ENDPOINT`` takes."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.refused = 0
        self.changed = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                try:
                    if self.path != "/v1/traces":
                        raise DecodeError(f"not the traces path: {self.path}")
                    spans = decode(body)
                except DecodeError:
                    with receiver.changed:
                        receiver.refused += 1
                    self.send_error(400)
                    return
                with receiver.changed:
                    receiver.spans.extend(spans)
                    receiver.changed.notify_all()
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # the test's output stays quiet

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, name="otlp-receiver", daemon=True)
        self.thread.start()

    def wait_for(self, predicate: Callable[[list[Span]], bool], timeout: float = 30.0) -> list[Span]:
        """The spans received so far, once ``predicate(spans)`` holds (AssertionError after ``timeout`` s)."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while not predicate(list(self.spans)):
                left = deadline - time.monotonic()
                assert left > 0, f"spans not received within {timeout} s: {[s.name for s in self.spans]}"
                self.changed.wait(left)
            return list(self.spans)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> OtlpReceiver:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def by_id(spans: list[Span]) -> dict[str, Span]:
    """The spans by their span id."""
    return {span.span_id: span for span in spans}


def ancestry(span: Span, spans: list[Span]) -> list[str]:
    """The names from ``span`` up to its trace's root (parents that did not arrive end the list)."""
    known, names = by_id(spans), [span.name]
    while span.parent_id in known:
        span = known[span.parent_id]
        names.append(span.name)
    return names


@contextlib.contextmanager
def exporting(receiver: OtlpReceiver, role: str = "web") -> Iterator[None]:
    """This process exports its spans to ``receiver`` inside the block (configured from the environment)."""
    overriding = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER")
    saved = {name: os.environ.pop(name, None) for name in overriding}
    os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.url
    try:
        assert tracing.configure(role, "test")
    finally:
        del os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"]
        os.environ.update({name: value for name, value in saved.items() if value is not None})
    try:
        yield
    finally:
        tracing.shutdown()
