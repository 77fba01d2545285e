"""OpenTelemetry spans of turns, model requests, tool calls and MCP requests; off until configured.

Off unless an OTLP endpoint is configured with the standard variables
(``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_ENDPOINT``; ``OTEL_SDK_DISABLED=true``
or ``OTEL_TRACES_EXPORTER=none`` keep it off). Until then the OpenTelemetry SDK and its exporter
are not imported (:mod:`mcpclient.telemetry.otlp` is loaded by :func:`configure` only), :func:`span`
is one shared no-op context and :func:`start` gives ``None``: a turn pays a few attribute checks.
Daphne (``boocode.asgi``) and the hub worker configure at start; one-off commands trace nothing.

Propagation is W3C Trace Context (``traceparent``, ``tracestate``) and W3C Baggage, whatever
``OTEL_PROPAGATORS`` says: those are the keys MCP 2026-07-28 reserves in a request's
``params._meta`` (the one exception to its prefix rule). :func:`carrier` is the current context
as those keys (empty when nothing is traced), :func:`meta_with_context` adds them to an MCP
request's ``_meta`` and :func:`attached` makes a carried context current (the hub worker's side
of the hop). A context carried in is passed on even where nothing is exported.

The tracer provider is this module's own, not OpenTelemetry's global one: the MCP SDK opens a
span per request through the global API, and without a global provider those stay no-ops that
pass the current span on, so the ``traceparent`` a server receives names BooCode's MCP request
span and the SDK's pings and listings make no traces of their own.
"""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager
from typing import Any, Protocol

from opentelemetry import context as otel_context
from opentelemetry import trace as otel_trace
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.trace import Span, SpanKind, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

# The keys MCP reserves in _meta for trace context, and the propagator that writes exactly those.
META_KEYS = ("traceparent", "tracestate", "baggage")
W3C = CompositePropagator([TraceContextTextMapPropagator(), W3CBaggagePropagator()])

KINDS = {
    "internal": SpanKind.INTERNAL,
    "client": SpanKind.CLIENT,
    "server": SpanKind.SERVER,
    "producer": SpanKind.PRODUCER,
    "consumer": SpanKind.CONSUMER,
}


class Backend(Protocol):
    """What :mod:`mcpclient.telemetry.otlp` sets up: a tracer and how to flush and stop it."""

    tracer: otel_trace.Tracer

    def flush(self, timeout: float) -> bool: ...

    def shutdown(self) -> None: ...


_backend: Backend | None = None
_NO_SPAN: AbstractContextManager[None] = contextlib.nullcontext()


def endpoint_setting(environ: Mapping[str, str] = os.environ) -> str:
    """The variable that configures the OTLP endpoint for traces ("" when none, or turned off)."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return ""
    if environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() == "none":
        return ""
    for name in ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"):
        if environ.get(name, "").strip():
            return name
    return ""


def endpoint(environ: Mapping[str, str] = os.environ) -> str:
    """The OTLP endpoint the environment configures for traces ("" when none, or turned off)."""
    name = endpoint_setting(environ)
    return environ[name].strip() if name else ""


def configure(role: str, version: str, environ: Mapping[str, str] = os.environ) -> bool:
    """Export this process's spans if the environment names an OTLP endpoint; whether it does.

    ``role`` names the process in every span's resource (``boocode.process``: ``web``,
    ``hub_worker``). Called once at start; a second call changes nothing.
    """
    global _backend
    if _backend is not None:
        return True
    if not endpoint(environ):
        return False
    # Imported here, not at the top: an unconfigured process never loads the SDK or the exporter.
    otlp = importlib.import_module("mcpclient.telemetry.otlp")
    _backend = otlp.start(role, version, W3C)
    return True


def enabled() -> bool:
    """Whether this process exports spans."""
    return _backend is not None


def flush(timeout: float = 10.0) -> bool:
    """Export the spans ended so far now (tests, shutdown); True when nothing is left."""
    return _backend.flush(timeout) if _backend is not None else True


def shutdown() -> None:
    """Export what is left and stop exporting: spans are no-ops again (tests)."""
    global _backend
    backend, _backend = _backend, None
    if backend is not None:
        backend.shutdown()


def span(
    name: str, *, kind: str = "internal", attributes: Mapping[str, Any] | None = None
) -> AbstractContextManager[Span | None]:
    """A span that is the current one inside the ``with`` (``None`` inside when nothing is traced).

    Ends with the block. An exception leaving it is not recorded as an error: the caller knows
    whether a cancellation is one (:func:`outcome` says how the span ended).
    """
    if _backend is None:
        return _NO_SPAN
    return _backend.tracer.start_as_current_span(
        name,
        kind=KINDS[kind],
        attributes=dict(attributes) if attributes else None,
        record_exception=False,
        set_status_on_exception=False,
    )


def start(name: str, *, kind: str = "internal", attributes: Mapping[str, Any] | None = None) -> Span | None:
    """A span child of the current one that is never current itself; the caller ends it.

    For work that spans an async generator's steps (a model stream), whose context is not the
    same from one step to the next.
    """
    if _backend is None:
        return None
    return _backend.tracer.start_span(
        name, kind=KINDS[kind], attributes=dict(attributes) if attributes else None
    )


def annotate(**attributes: Any) -> None:
    """Add ``attributes`` to the current span (nothing when nothing is traced)."""
    if _backend is not None:
        otel_trace.get_current_span().set_attributes(attributes)


def outcome(current: Span | None, error: str = "", **attributes: Any) -> None:
    """Record how ``current`` ended: its attributes and, with ``error``, the error status."""
    if current is None:
        return
    if attributes:
        current.set_attributes(attributes)
    if error:
        current.set_attribute("error.type", error)
        current.set_status(StatusCode.ERROR, error)


def carrier() -> dict[str, str]:
    """The current trace context as W3C keys (``traceparent``...); empty when nothing is traced."""
    if not otel_trace.get_current_span().get_span_context().is_valid:
        return {}
    carried: dict[str, str] = {}
    W3C.inject(carried)
    return carried


def meta_with_context(meta: dict[str, Any] | None) -> dict[str, Any] | None:
    """An MCP request's ``_meta`` with the current trace context added (``meta`` when none)."""
    carried = carrier()
    if not carried:
        return meta
    return {**(meta or {}), **carried}


@contextlib.contextmanager
def attached(carried: Mapping[str, Any] | None) -> Iterator[None]:
    """Make the context in ``carried`` (W3C keys from another process) current inside the block."""
    if not carried:
        yield
        return
    token = otel_context.attach(W3C.extract({k: str(v) for k, v in carried.items() if k in META_KEYS}))
    try:
        yield
    finally:
        otel_context.detach(token)
