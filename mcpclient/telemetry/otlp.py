"""The OpenTelemetry SDK exporting spans over OTLP/HTTP: loaded only when an endpoint is configured.

:func:`start` builds this process's tracer provider: the resource (``service.name`` ``boocode``
unless ``OTEL_SERVICE_NAME`` or ``OTEL_RESOURCE_ATTRIBUTES`` name it, ``service.version``,
``boocode.process``), the sampler the ``OTEL_TRACES_SAMPLER`` variables choose (every trace by
default) and a batch processor whose exporter reads the standard ``OTEL_EXPORTER_OTLP_*``
variables (endpoint, headers, timeout, compression) and ``OTEL_BSP_*`` (batching). The provider
stays this module's own (see :mod:`mcpclient.telemetry.tracing`); the global propagator becomes
W3C Trace Context and Baggage, so every ``_meta`` the MCP SDK writes carries the keys MCP
reserves and nothing else. What is batched is exported when the process exits.
"""

from __future__ import annotations

from opentelemetry import propagate
from opentelemetry import trace as otel_trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.propagators.textmap import TextMapPropagator
from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

DEFAULT_SERVICE_NAME = "boocode"


class Tracing:
    """This process's tracer provider, its exporter and the tracer BooCode's spans come from."""

    def __init__(self, role: str, version: str) -> None:
        resource = Resource.create({SERVICE_VERSION: version, "boocode.process": role})
        if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
            resource = resource.merge(Resource({SERVICE_NAME: DEFAULT_SERVICE_NAME}))
        self.provider = TracerProvider(resource=resource)
        self.provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        self.tracer: otel_trace.Tracer = self.provider.get_tracer("boocode", version)

    def flush(self, timeout: float) -> bool:
        """Export every ended span now; True when all went out within ``timeout`` seconds."""
        return self.provider.force_flush(int(timeout * 1000))

    def shutdown(self) -> None:
        """Export what is left and stop."""
        self.provider.shutdown()


def start(role: str, version: str, propagator: TextMapPropagator) -> Tracing:
    """Start exporting this process's spans (see the module docstring); ``propagator`` becomes the
    global one (tracing.W3C: passed in, so this module imports nothing of its caller)."""
    propagate.set_global_textmap(propagator)
    return Tracing(role, version)
