"""``hivestream serve``: live capture on one machine without a broker. The ingest server's routes
over a local durable hook-event log (:mod:`.log_writer`, :mod:`.log_sink`), deduplicated
continuously into DuckDB by the embedded runner's code (:mod:`.follower`), with a service unit to
keep it up (:mod:`.service`) and the move of its log onto Kafka (:mod:`.handoff`).
"""
