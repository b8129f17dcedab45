"""Redaction of secrets and personal data before a payload reaches a topic or a table: the rules
(:mod:`.rules`, their checks :mod:`.checks`), the redactor (:mod:`.redact`) and the scrub of hook
events and values at ingest (:mod:`.scrub`). Shared by the KnowHub pipeline, the memory-tool read
side, the front door and ``produce``.
"""
