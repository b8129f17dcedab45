"""Live ingestion, the pure parts: request bodies to events (:mod:`.payloads`), bearer tokens
(:mod:`.auth`), the checksummed spool record format (:mod:`.spool_format`) and the answer a
runtime's own http hook gets (:mod:`.hook_output`).

The I/O around them lives in :mod:`hivestream.ingest.server` (HTTP), :mod:`hivestream.ingest.spool`
(the on-disk spool) and :mod:`hivestream.hooks.command` (the command hook).
"""
