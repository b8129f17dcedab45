"""What the HTTP server of ``hivestream ingest`` and ``hivestream serve`` needs from the place it
puts accepted records: a small interface, so both commands share the routes, the tokens, the
limits and the answers (:mod:`hivestream.ingest.server`) and differ only in their sink.

* ``ingest``: :class:`hivestream.ingest.sink.DurableSink` (the broker, else the spool).
* ``serve``: :class:`hivestream.serve.log_sink.LogSink` (the local hook-event log).
"""

from __future__ import annotations

from typing import Any, Protocol

Record = tuple[str, bytes, bytes]
"""(topic, key, value) of one Kafka record."""

Gauge = tuple[str, str, float]
"""(metric name, help text, value) of one gauge ``/metrics`` shows."""


class RecordSink(Protocol):
    """A durable home for the server's records.

    Attributes:
        error_reason: the reason code of the 503 answered when :meth:`write` raises ``OSError``
            (``spool_error``, ``log_error``).
    """

    error_reason: str

    async def write(self, records: list[Record]) -> str:
        """Make ``records`` durable; returns where (the answer's ``durable``: ``broker``, ``spool``, ``log``).

        Raises:
            hivestream.ingest.refusal.SinkFull: the bound is reached (nothing promised: 503).
            OSError: the records could not be made durable (nothing promised: 503).
        """
        ...

    def health(self) -> tuple[bool, dict[str, Any]]:
        """(whether a POST would be accepted now, the ``/healthz`` body)."""
        ...

    def gauges(self) -> list[Gauge]:
        """The sink's gauges for ``/metrics``, read now."""
        ...

    def startup_note(self) -> str | None:
        """A line to log once at start (what an earlier run left), or ``None``."""
        ...

    async def background(self) -> None:
        """The sink's background work (forwarding, group commits) until cancelled."""
        ...

    async def close(self) -> None:
        """Flush and release what the sink holds."""
        ...
