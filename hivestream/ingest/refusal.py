"""The one refusal a sink of the ingest server raises besides ``OSError`` (standard library only:
the command hook imports the spool, whose :class:`~hivestream.ingest.spool.SpoolFull` is one)."""

from __future__ import annotations


class SinkFull(Exception):
    """The sink's byte bound would be passed: the server answers 503 with ``Retry-After`` and the
    reason code :attr:`reason` (nothing was promised, the client keeps its payloads)."""

    reason = "sink_full"
