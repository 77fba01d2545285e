"""What BooCode tells its operators: Prometheus metrics and OpenTelemetry traces.

Owns: the metrics of the MCP side and the exposition every ``/metrics`` endpoint shares
(``metrics``), the spans and the W3C trace context carried across processes and into MCP
requests (``tracing``), and the OpenTelemetry SDK set up for an OTLP endpoint (``otlp``, loaded
only when one is configured). The product's own metrics (turns, model requests, tool calls of a
conversation) live with the chat (``boocode.chat.ledger.metrics``) and register in the same registry.
May import: ``mcpclient.core``, ``prometheus_client`` and OpenTelemetry. No Django: the hub
worker's endpoint and every layer above use it.
"""
