"""Named analytics queries over the memory-stub tables (``hivestream stubs query NAME``).

"Now" for staleness is the newest event time in the projection (stub, match or message),
never the wall clock, so a replayed history gives the same answer on any day.
"""

from __future__ import annotations

import duckdb

from projections.named_query import NamedQuery, run_query

DAY_MS = 86_400_000
STALE_GRACE_MS = 2 * 3_600_000
"""Grace after the nightly 03:20 UTC refresh job: a refreshable stub is stale when its last
refresh (or creation, if never refreshed) is older than 24 h + 2 h before the newest event."""

NIGHTLY_SOURCES = ("file-watch", "scheduler-db-query", "script")
"""Refresh types the nightly job refreshes (``manual`` never is; ``none`` = NULL is skipped)."""

_DAY = "strftime(to_timestamp(event_time_ms / 1000) AT TIME ZONE 'UTC', '%Y-%m-%d')"
_STUB = "CASE WHEN {c} = '' THEN '(global)' ELSE {c} END"
_NOW = """(SELECT max(t) FROM (
              SELECT max(greatest(created_at_ms, coalesce(last_matched_at_ms, 0), coalesce(last_refreshed_at_ms, 0))) AS t FROM stubs
              UNION ALL SELECT max(event_time_ms) FROM stub_messages))"""
_THRESHOLD = "coalesce((SELECT TRY_CAST(value AS DOUBLE) FROM stub_meta WHERE key = 'threshold'), 0.65)"
_SOURCES = ", ".join(f"'{s}'" for s in NIGHTLY_SOURCES)

STUB_QUERIES: dict[str, NamedQuery] = {
    q.name: q
    for q in [
        NamedQuery(
            "never-matched",
            "live stubs that were never matched (imported count included)",
            f"""SELECT {_STUB.format(c="channel")} AS channel, stub_id, title, refresh_source, archive_tokens,
                       strftime(to_timestamp(created_at_ms / 1000) AT TIME ZONE 'UTC', '%Y-%m-%d %H:%M') AS created_utc
                FROM stubs WHERE NOT deleted AND match_count = 0 ORDER BY channel, stub_id""",
        ),
        NamedQuery(
            "stale",
            "refreshable stubs (file-watch, scheduler-db-query, script) not refreshed within 24 h + 2 h grace of the newest event",
            f"""WITH now AS (SELECT {_NOW} AS now_ms)
                SELECT {_STUB.format(c="channel")} AS channel, stub_id, title, refresh_source,
                       strftime(to_timestamp(coalesce(last_refreshed_at_ms, created_at_ms) / 1000) AT TIME ZONE 'UTC', '%Y-%m-%d %H:%M')
                           AS last_refreshed_utc,
                       round((now_ms - coalesce(last_refreshed_at_ms, created_at_ms)) / 3600000.0, 1) AS hours_since
                FROM stubs, now
                WHERE NOT deleted AND refresh_source IN ({_SOURCES})
                  AND coalesce(last_refreshed_at_ms, created_at_ms) < now_ms - {DAY_MS + STALE_GRACE_MS}
                ORDER BY hours_since DESC, channel, stub_id""",
        ),
        NamedQuery(
            "hit-rate",
            "main-runtime messages with at least one match, per channel per day (UTC)",
            f"""SELECT {_DAY} AS day, channel, count(*) AS messages, count(*) FILTER (WHERE matched) AS hits,
                       round(count(*) FILTER (WHERE matched) / count(*), 3) AS hit_rate
                FROM stub_messages WHERE origin = 'main' GROUP BY ALL ORDER BY day, channel""",
        ),
        NamedQuery(
            "similarity-near-threshold",
            "best similarity per main message in 0.01 bins within ±0.10 of the run's threshold",
            f"""WITH t AS (SELECT {_THRESHOLD} AS thr)
                SELECT round(floor(best_similarity * 100) / 100, 2) AS bin_from, count(*) AS messages,
                       count(*) FILTER (WHERE matched) AS matched,
                       CASE WHEN floor(best_similarity * 100) / 100 >= floor(thr * 100) / 100 THEN 'at/above' ELSE 'below' END AS side
                FROM stub_messages, t
                WHERE origin = 'main' AND best_similarity IS NOT NULL AND abs(best_similarity - thr) <= 0.10
                GROUP BY ALL ORDER BY bin_from""",
        ),
        NamedQuery(
            "tokens-per-day",
            "matches and archive tokens injected per channel per day (UTC)",
            f"""SELECT {_DAY} AS day, channel, count(DISTINCT message_id) AS messages, count(*) AS matches,
                       sum(tokens_injected) AS tokens
                FROM stub_matches GROUP BY ALL ORDER BY day, channel""",
        ),
        NamedQuery(
            "top-stubs",
            "the 20 stubs with the most matches (imported count included), with the matches in this projection",
            f"""SELECT {_STUB.format(c="s.channel")} AS channel, s.stub_id, s.title, s.match_count,
                       count(m.stub_id) AS projected_matches, coalesce(sum(m.tokens_injected), 0) AS tokens,
                       round(avg(m.similarity), 4) AS avg_similarity
                FROM stubs s LEFT JOIN stub_matches m ON m.stub_channel = s.channel AND m.stub_id = s.stub_id
                WHERE NOT s.deleted GROUP BY ALL ORDER BY s.match_count DESC, projected_matches DESC, channel, s.stub_id LIMIT 20""",
        ),
        NamedQuery(
            "dead-letters",
            "rejected stub input per reason code and input",
            """SELECT coalesce(nullif(regexp_extract(detail, '^([a-z0-9_]+): ', 1), ''), reason) AS code, reason, input,
                      count(*) AS records, any_value(detail) AS example
               FROM stub_dead_letters GROUP BY ALL ORDER BY records DESC, code""",
        ),
    ]
}


def run_stub_query(con: duckdb.DuckDBPyConnection, name: str) -> tuple[list[str], list[tuple[object, ...]]]:
    """Run the named stub query on ``con`` (see :func:`projections.named_query.run_query`).

    Raises:
        KeyError: for an unknown name; duckdb.Error: when the file has no stub tables.
    """
    return run_query(con, name, STUB_QUERIES)
