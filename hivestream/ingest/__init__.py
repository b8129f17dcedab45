"""The front door's I/O half: the HTTP server (``hivestream ingest``), its Kafka sink, the spool,
the metrics. The pure half (payload parsing, auth, partitioning, the spool's format) is
:mod:`streams.ingest`.
"""
