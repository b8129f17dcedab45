"""Named analytics queries over a projection file (``hivestream query NAME``)."""

from __future__ import annotations

from projections.named_query import NamedQuery

_DAY = "strftime(to_timestamp(event_time_ms / 1000) AT TIME ZONE 'UTC', '%Y-%m-%d')"

QUERIES: dict[str, NamedQuery] = {
    q.name: q
    for q in [
        NamedQuery(
            "totals",
            "captures in, frames out, duplicates collapsed, dead-lettered records",
            """SELECT (SELECT count(*) FROM frame_captures) AS captures,
                      (SELECT count(*) FROM frames) AS frames,
                      (SELECT count(*) FROM frame_captures WHERE is_duplicate) AS duplicates,
                      (SELECT count(*) FROM dead_letters) AS dead_letters""",
        ),
        NamedQuery(
            "dedup-summary",
            "duplicates collapsed per source pair (first writer's source -> duplicate's source)",
            """SELECT f.source AS first_source, c.source AS duplicate_source,
                      count(*) AS duplicates, count(DISTINCT c.frame_id) AS frames
               FROM frame_captures c JOIN frames f USING (frame_id)
               WHERE c.is_duplicate
               GROUP BY ALL ORDER BY duplicates DESC, first_source, duplicate_source""",
        ),
        NamedQuery(
            "top-frames",
            "the 20 frames with the highest access_count",
            """SELECT frame_id, access_count, sources, event_type,
                      left(regexp_replace(content, '\\s+', ' ', 'g'), 80) AS content
               FROM frames ORDER BY access_count DESC, first_seen_ms, frame_id LIMIT 20""",
        ),
        NamedQuery(
            "captures-per-day",
            "captures per source per day (UTC), with how many were duplicates",
            f"""SELECT {_DAY} AS day, source, count(*) AS captures,
                       count(*) FILTER (WHERE is_duplicate) AS duplicates
                FROM frame_captures GROUP BY ALL ORDER BY day, source""",
        ),
        NamedQuery(
            "dead-letters",
            "dead-lettered records per reason and input (a front-door refusal under its route, ingest:<gateway>:<runtime>)",
            """SELECT reason, regexp_replace(input, '^(ingest:.*):[0-9a-f]{32}$', '\\1') AS input,  -- without the request id
                      count(*) AS records, any_value(detail) AS example
               FROM dead_letters GROUP BY ALL ORDER BY records DESC, reason""",
        ),
    ]
}
