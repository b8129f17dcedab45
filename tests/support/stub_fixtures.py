"""Shared fixtures of the stub tests: NanoClaw's stubs.db schema, exactly as the seed gives it."""

SCHEMA = """CREATE TABLE stubs (
    id INTEGER PRIMARY KEY,
    title TEXT,
    stub_text TEXT,
    archive_path TEXT,
    embedding BLOB,
    created_at TEXT,
    last_matched_at TEXT,
    match_count INTEGER,
    refresh_source TEXT,
    last_refreshed_at TEXT
)"""
