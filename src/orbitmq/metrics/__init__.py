"""Prometheus metrics of the broker and the name server (operations-features §3).

``recorder`` counts on the request path (plain integers, per request or batch), ``families``
turns the counts and a view of the server's tables into Prometheus families at scrape time,
``exporter`` serves them on ``metricsPromExporterPort``, ``instrument`` times every request
(the transport's ``on_handled`` hook), ``steps`` runs the per-topic passes of a scrape on the
event loop a slice at a time.
This package knows no broker internals: the broker fills :class:`BrokerView`
(``broker.metrics_view``).
"""

from orbitmq.metrics.exporter import (
    MetricsExporter,
    MetricsExporterType,
    SlicedCollector,
    serve_metrics,
    serve_metrics_in_steps,
)
from orbitmq.metrics.families import BrokerView, LagRow, NamesrvView, broker_families, namesrv_families
from orbitmq.metrics.instrument import request_code_names, rpc_timer
from orbitmq.metrics.recorder import Recorder, message_type_of

__all__ = [
    "serve_metrics",
    "serve_metrics_in_steps",
    "SlicedCollector",
    "BrokerView",
    "LagRow",
    "MetricsExporter",
    "MetricsExporterType",
    "NamesrvView",
    "Recorder",
    "rpc_timer",
    "broker_families",
    "message_type_of",
    "namesrv_families",
    "request_code_names",
]
