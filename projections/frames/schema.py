"""DuckDB schema of the projections (docs/design.md#projections). Times are epoch milliseconds (``*_ms``)."""

from __future__ import annotations

from streams.model.details import DETAIL_FIELDS

SCHEMA_VERSION = 1

POSITIONS_DDL = """CREATE TABLE IF NOT EXISTS positions (
        input VARCHAR NOT NULL,              -- topic, or file:<path> in the embedded runner
        src_partition INTEGER NOT NULL,
        next_offset BIGINT NOT NULL,         -- first offset not yet applied
        PRIMARY KEY (input, src_partition)
    )"""
"""The frames file's positions table (the frames projection's and the memory tool calls')."""

# The long strings (content, ids, hashes) are stored with zstd, not DuckDB's default dictionary +
# FSST: a checkpoint of a 200,000-capture run's rows took 0.34 s of CPU instead of 0.48 (the
# writer's closing checkpoint runs on one thread after the last batch), the file was
# 5 % smaller, and a full scan of ``content`` (``ILIKE``) ~25 % slower. Files created before keep
# their columns' settings (``CREATE TABLE IF NOT EXISTS``).

DDL = [
    """CREATE TABLE IF NOT EXISTS frames (
        frame_id VARCHAR NOT NULL USING COMPRESSION zstd,  -- the first writer's event id; unique (the sink merges by it; no index: sink.py)
        dedup_key VARCHAR NOT NULL USING COMPRESSION zstd,
        body_hash VARCHAR NOT NULL USING COMPRESSION zstd,  -- sha256 hex of the stripped, trimmed body
        content VARCHAR USING COMPRESSION zstd,  -- first writer's content, [hm] prefix included
        source VARCHAR,                      -- first writer's source
        session VARCHAR,
        event_type VARCHAR,
        parent VARCHAR,
        project VARCHAR,
        importance VARCHAR,
        created_at_ms BIGINT,                -- first writer's event time (window anchor)
        first_seen_ms BIGINT NOT NULL,       -- earliest capture event time
        last_accessed_ms BIGINT NOT NULL,    -- latest capture event time
        access_count BIGINT NOT NULL,        -- number of captures (1 + touches)
        sources VARCHAR[] NOT NULL           -- every source that captured it, sorted
    )""",
    """CREATE TABLE IF NOT EXISTS frame_captures (
        event_id VARCHAR NOT NULL USING COMPRESSION zstd,  -- unique (the sink inserts only new event ids; no index, see projections/frames/projection.py)
        frame_id VARCHAR NOT NULL USING COMPRESSION zstd,
        source VARCHAR NOT NULL,
        session VARCHAR,
        event_type VARCHAR,
        event_time_ms BIGINT NOT NULL,
        is_duplicate BOOLEAN NOT NULL,
        src_partition INTEGER,
        src_offset BIGINT,
        is_late BOOLEAN NOT NULL DEFAULT false  -- event time below its key group's watermark (docs/dedup.md)
    )""",
    """CREATE TABLE IF NOT EXISTS skipped_events (
        event_id VARCHAR NOT NULL USING COMPRESSION zstd,  -- unique (the sink inserts only new event ids, as in frame_captures)
        reason VARCHAR NOT NULL,             -- not_a_turn | no_text | empty_body | placeholder | failed_send (streams/frames/capture.py)
        source VARCHAR NOT NULL,
        session VARCHAR,
        event_type VARCHAR,                  -- normalised, e.g. pre-tool-use, session-end, stop
        native_event VARCHAR,                -- the runtime's name, e.g. PreToolUse, message:sent, after_compaction
        project VARCHAR,
        event_time_ms BIGINT NOT NULL,
        src_partition INTEGER,
        src_offset BIGINT
    )""",
    """CREATE TABLE IF NOT EXISTS event_details_json (
        event_id VARCHAR NOT NULL USING COMPRESSION zstd,  -- a frame_captures or skipped_events event id; unique (written with that row)
        details VARCHAR NOT NULL USING COMPRESSION zstd    -- the event's ids and metadata, a JSON object (streams/model/details.py)
    )""",
    # the same as typed columns, one per detail field; a view, so the writer only appends text (a
    # json_transform per row cost the runner ~0.8 µs per capture) and a file keeps every field a later
    # version reads; a value that is no JSON object (a hand-made frames record) gives no row
    "CREATE OR REPLACE VIEW event_details AS SELECT event_id, unnest(json_transform(details, '{"
    + ", ".join(f'"{f}": "{"BOOLEAN" if f == "is_group" else "VARCHAR"}"' for f in DETAIL_FIELDS)
    + "}')) FROM event_details_json WHERE json_valid(details) AND json_type(details) = 'OBJECT'",
    """CREATE TABLE IF NOT EXISTS dead_letters (
        input VARCHAR NOT NULL,              -- topic or input file
        src_partition INTEGER NOT NULL,
        src_offset BIGINT NOT NULL,
        event_key VARCHAR NOT NULL,          -- the event id when the record had one, else ''
        reason VARCHAR NOT NULL,
        detail VARCHAR,
        original BLOB,
        time_ms BIGINT,
        PRIMARY KEY (input, src_partition, src_offset, event_key)
    )""",
    POSITIONS_DDL,
    """CREATE TABLE IF NOT EXISTS dedup_state (
        dedup_key VARCHAR NOT NULL,          -- embedded runner only; one row per key (no index: dedup_state.py)
        frames VARCHAR NOT NULL              -- JSON of the key's streams.frames.dedup.DedupFold entry
    )""",
    """CREATE TABLE IF NOT EXISTS meta (
        key VARCHAR PRIMARY KEY,
        value VARCHAR
    )""",
]
