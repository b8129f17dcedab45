"""Prometheus metrics of ``hivestream ingest`` (``GET /metrics``, text exposition format).

One :class:`prometheus_client.CollectorRegistry` per server, so several servers in one process
(tests) do not share counters. Names:

* ``hivestream_ingest_requests_total{status}``: HTTP answers by status code.
* ``hivestream_ingest_accepted_total{runtime}``: payloads accepted (durable).
* ``hivestream_ingest_rejected_total{reason}``: payloads or bodies rejected, by reason code
  (dead-letter reasons, plus ``unauthorized``, ``body_too_large``, ``client_timeout``,
  ``spool_full``, ``unknown_runtime``).
* ``hivestream_ingest_spooled_records`` / ``hivestream_ingest_spool_bytes``: what the spool holds now.
* ``hivestream_ingest_spooled_total`` / ``hivestream_ingest_forwarded_total``: records written to
  the spool / forwarded from it to the broker.
* ``hivestream_ingest_forward_lag_seconds``: age of the oldest spooled record (0 when empty).
* ``hivestream_ingest_broker_up``: 1 when the producer is connected.
* ``hivestream_ingest_produce_latency_seconds``: broker round trip of a request's records.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from hivestream.ingest.record_sink import RecordSink

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class IngestMetrics:
    """The server's metrics; :meth:`render` refreshes the spool gauges and renders the text."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("hivestream_ingest_requests", "HTTP answers by status code", ["status"], registry=r)
        self.accepted = Counter("hivestream_ingest_accepted", "payloads accepted (durable)", ["runtime"], registry=r)
        self.rejected = Counter("hivestream_ingest_rejected", "payloads or bodies rejected, by reason", ["reason"], registry=r)
        self._gauges: dict[str, Gauge] = {}  # the sink's gauges (RecordSink.gauges), made on first sight
        self.latency = Histogram(
            "hivestream_ingest_produce_latency_seconds", "broker round trip of one request's records",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0), registry=r,
        )

        self._children: dict[tuple[str, str], Any] = {}

    def _child(self, family: str, label: str) -> Any:
        child = self._children.get((family, label))
        if child is None:
            child = self._children[(family, label)] = getattr(self, family).labels(label)
        return child

    def request(self, status: int) -> None:
        """Count one HTTP answer with ``status`` (labelled children are looked up once, then kept)."""
        self._child("requests", str(status)).inc()

    def accept(self, runtime: str, n: int) -> None:
        """Count ``n`` payloads accepted on route ``runtime``."""
        self._child("accepted", runtime).inc(n)

    def reject(self, reason: str) -> None:
        """Count one payload or body rejected with ``reason``."""
        self._child("rejected", reason).inc()

    def render(self, sink: RecordSink) -> bytes:
        """The exposition text, with the sink's gauges (:meth:`RecordSink.gauges`) read now."""
        for name, help_text, value in sink.gauges():
            g = self._gauges.get(name)
            if g is None:
                g = self._gauges[name] = Gauge(name, help_text, registry=self.registry)
            g.set(value)
        return generate_latest(self.registry)
