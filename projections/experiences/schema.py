"""DuckDB schema of the KnowHub projection (tables start with ``experience`` or ``kb_``). Times are epoch ms.

``experience_submissions`` holds every submission or extraction with the experience it was
deduplicated into; ``experiences`` is derived from it and from ``experience_reviews`` for the
experiences a batch touched (so it is idempotent and independent of the order reviews arrive in).
"""

from __future__ import annotations

KB_DDL = [
    """CREATE TABLE IF NOT EXISTS experience_submissions (
        event_id VARCHAR PRIMARY KEY,
        experience_id VARCHAR NOT NULL,      -- = the first writer's event id
        dedup_key VARCHAR NOT NULL,          -- hash of the normalised (task, resource, result)
        kind VARCHAR NOT NULL,               -- submitted | extracted
        task VARCHAR NOT NULL,               -- redacted in strict mode
        resource VARCHAR NOT NULL,
        result VARCHAR NOT NULL,
        confidence DOUBLE,
        agent_id VARCHAR NOT NULL,
        submitted_by VARCHAR NOT NULL,
        session_key VARCHAR NOT NULL,
        source_tool VARCHAR NOT NULL,
        runtime VARCHAR NOT NULL,
        privacy_mode VARCHAR NOT NULL,
        redaction_count INTEGER NOT NULL,
        injection_rules VARCHAR[] NOT NULL,
        requires_review BOOLEAN NOT NULL,
        anchor_ms BIGINT NOT NULL,           -- the experience's first writer's event time (dedup anchor)
        event_time_ms BIGINT NOT NULL,
        is_duplicate BOOLEAN NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS experience_redactions (
        event_id VARCHAR NOT NULL,           -- the submission
        kind VARCHAR NOT NULL,               -- email, phone, home_user, openai_key, ...
        n INTEGER NOT NULL,
        PRIMARY KEY (event_id, kind)
    )""",
    """CREATE TABLE IF NOT EXISTS experience_reviews (
        event_id VARCHAR PRIMARY KEY,
        experience_id VARCHAR NOT NULL,
        decision VARCHAR NOT NULL,           -- approved | rejected
        reviewer VARCHAR NOT NULL,
        reason VARCHAR NOT NULL,
        event_time_ms BIGINT NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS experiences (
        experience_id VARCHAR PRIMARY KEY,
        dedup_key VARCHAR NOT NULL,
        origin VARCHAR NOT NULL,             -- submitted | extracted (the first writer's kind)
        task VARCHAR NOT NULL,
        resource VARCHAR NOT NULL,
        result VARCHAR NOT NULL,
        status VARCHAR NOT NULL,             -- pending | approved | rejected | quarantined
        confidence DOUBLE,                   -- the first writer's
        first_agent_id VARCHAR NOT NULL,
        agent_ids VARCHAR[] NOT NULL,        -- every submitting agent, in order of first submission
        submit_count INTEGER NOT NULL,
        redaction_count INTEGER NOT NULL,    -- replacements over every submission
        injection_flag BOOLEAN NOT NULL,
        injection_rules VARCHAR[] NOT NULL,
        first_seen_ms BIGINT NOT NULL,
        last_seen_ms BIGINT NOT NULL,
        reviewed_at_ms BIGINT,
        reviewer VARCHAR,
        review_reason VARCHAR
    )""",
    """CREATE TABLE IF NOT EXISTS kb_telemetry (
        event_id VARCHAR PRIMARY KEY,
        kind VARCHAR NOT NULL,               -- search | content | recall (agent_filter: the project) | reminder
        session_key VARCHAR NOT NULL,
        agent_id VARCHAR NOT NULL,
        query VARCHAR,
        agent_filter VARCHAR,
        hit_count INTEGER,
        experience_ref VARCHAR,
        trigger VARCHAR,
        llm_call INTEGER,
        runtime VARCHAR,
        event_time_ms BIGINT NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS kb_dead_letters (
        input VARCHAR NOT NULL,
        src_offset BIGINT NOT NULL,
        event_key VARCHAR NOT NULL,
        reason VARCHAR NOT NULL,
        detail VARCHAR,                      -- redacted in strict mode
        original BLOB,                       -- redacted in strict mode
        time_ms BIGINT,
        PRIMARY KEY (input, src_offset, event_key)
    )""",
    """CREATE TABLE IF NOT EXISTS kb_dedup_state (
        dedup_key VARCHAR PRIMARY KEY,       -- the experience dedup core's state (streams.frames.dedup.DedupFold), stored with the rows
        value VARCHAR NOT NULL               -- JSON
    )""",
    """CREATE TABLE IF NOT EXISTS kb_positions (
        input VARCHAR NOT NULL,
        src_partition INTEGER NOT NULL,
        next_offset BIGINT NOT NULL,
        PRIMARY KEY (input, src_partition)
    )""",
]

REFRESH_EXPERIENCES = """
INSERT OR REPLACE INTO experiences
WITH subs AS (
    SELECT * FROM experience_submissions WHERE experience_id IN (SELECT id FROM _touched)
), first AS (
    SELECT * FROM subs WHERE event_id = experience_id
), agg AS (
    SELECT experience_id, count(*) AS n, sum(redaction_count) AS red, bool_or(len(injection_rules) > 0) AS flagged,
           list_sort(list_distinct(flatten(list(injection_rules)))) AS rules,
           min(event_time_ms) AS first_seen, max(event_time_ms) AS last_seen
    FROM subs GROUP BY experience_id
), agents AS (
    SELECT experience_id, list(agent_id ORDER BY t, agent_id) AS ids FROM (
        SELECT experience_id, agent_id, min(event_time_ms) AS t FROM subs GROUP BY experience_id, agent_id)
    GROUP BY experience_id
), review AS (
    SELECT experience_id, decision, reviewer, reason, event_time_ms FROM experience_reviews
    WHERE experience_id IN (SELECT id FROM _touched)
    QUALIFY row_number() OVER (PARTITION BY experience_id ORDER BY event_time_ms DESC, event_id DESC) = 1
)
SELECT f.experience_id, f.dedup_key, f.kind, f.task, f.resource, f.result,
       coalesce(r.decision, CASE WHEN a.flagged THEN 'quarantined' WHEN f.requires_review THEN 'pending' ELSE 'approved' END),
       f.confidence, f.agent_id, g.ids, a.n, a.red, a.flagged, a.rules, a.first_seen, a.last_seen,
       r.event_time_ms, r.reviewer, r.reason
FROM first f JOIN agg a USING (experience_id) JOIN agents g USING (experience_id) LEFT JOIN review r USING (experience_id)
"""
