"""KnowHub experiences: events, redaction, injection quarantine, dedup, extraction, search."""
