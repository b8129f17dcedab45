"""DuckDB schema of the memory-stub projection. Times are epoch milliseconds (``*_ms``).

The tables can live in the same file as the frames projection (all names start with ``stub``).
A stub's scope is stored as ``channel`` with ``''`` for the global set (``stubs-global.db``),
because key columns cannot be NULL; a channel is never the empty string.
"""

from __future__ import annotations

GLOBAL = ""
"""The ``channel`` / ``stub_channel`` value of a global stub."""

STUB_DDL = [
    """CREATE TABLE IF NOT EXISTS stubs (
        channel VARCHAR NOT NULL,            -- the stub's channel, '' = global
        stub_id BIGINT NOT NULL,             -- id in its stubs.db
        title VARCHAR,
        stub_text VARCHAR,
        archive_path VARCHAR,
        archive_tokens BIGINT,               -- tokens charged per injection
        model VARCHAR,
        dim INTEGER,
        refresh_source VARCHAR,              -- file-watch | scheduler-db-query | script | manual | none
        refresh_spec VARCHAR,                -- the verbatim refresh_source JSON
        created_at_ms BIGINT,
        last_matched_at_ms BIGINT,
        last_refreshed_at_ms BIGINT,
        match_count BIGINT NOT NULL,         -- imported starting count + matches since
        deleted BOOLEAN NOT NULL,
        PRIMARY KEY (channel, stub_id)
    )""",
    """CREATE TABLE IF NOT EXISTS stub_vectors (
        channel VARCHAR NOT NULL,            -- runner state: the live stubs' embeddings
        stub_id BIGINT NOT NULL,
        model VARCHAR NOT NULL,
        dim INTEGER NOT NULL,
        embedding_b64 VARCHAR NOT NULL,      -- base64 float32 little-endian, dim * 4 bytes
        PRIMARY KEY (channel, stub_id)
    )""",
    """CREATE TABLE IF NOT EXISTS stub_matches (
        message_id VARCHAR NOT NULL,
        channel VARCHAR NOT NULL,            -- the message's channel
        stub_channel VARCHAR NOT NULL,       -- the stub's channel, '' = global
        stub_id BIGINT NOT NULL,
        similarity DOUBLE NOT NULL,
        rank INTEGER NOT NULL,               -- 1-based
        tokens_injected BIGINT NOT NULL,
        event_time_ms BIGINT NOT NULL,       -- the message's time
        event_id VARCHAR NOT NULL,
        PRIMARY KEY (message_id, channel, stub_channel, stub_id)
    )""",
    """CREATE TABLE IF NOT EXISTS stub_messages (
        channel VARCHAR NOT NULL,
        message_id VARCHAR NOT NULL,
        event_id VARCHAR NOT NULL,
        event_time_ms BIGINT NOT NULL,
        origin VARCHAR NOT NULL,             -- main | subagent (subagents never match)
        matched BOOLEAN NOT NULL,
        match_count INTEGER NOT NULL,
        tokens_injected BIGINT NOT NULL,
        best_similarity DOUBLE,              -- best candidate whatever the threshold; NULL for subagents
        PRIMARY KEY (channel, message_id)
    )""",
    """CREATE TABLE IF NOT EXISTS stub_dead_letters (
        input VARCHAR NOT NULL,
        src_offset BIGINT NOT NULL,
        event_key VARCHAR NOT NULL,          -- the event id when the record parsed, else ''
        reason VARCHAR NOT NULL,
        detail VARCHAR,                      -- starts with the StubError code when there is one
        original BLOB,
        time_ms BIGINT,
        PRIMARY KEY (input, src_offset, event_key)
    )""",
    """CREATE TABLE IF NOT EXISTS stub_positions (
        input VARCHAR NOT NULL,              -- file:<path>, stubs-db:<path>, or a topic
        src_partition INTEGER NOT NULL,
        next_offset BIGINT NOT NULL,         -- first offset not yet applied
        PRIMARY KEY (input, src_partition)
    )""",
    """CREATE TABLE IF NOT EXISTS stub_applied_events (
        event_id VARCHAR PRIMARY KEY         -- Kafka path: stub state events applied once (global ones arrive once per partition)
    )""",
    """CREATE TABLE IF NOT EXISTS stub_meta (
        key VARCHAR PRIMARY KEY,             -- threshold, top_n, token_budget of the runs
        value VARCHAR
    )""",
]
