"""The data behind ``hivestream report``: one small table per chart, read from projection files.

Each function takes a read-only DuckDB connection and returns ``(column names, rows)``, already
aggregated (a few hundred rows at most, whatever the number of events), or empty rows when the
file lacks the tables or has no data yet. Nothing here draws; :mod:`hivestream.report` does.
Times are epoch ms, days UTC.
"""

from __future__ import annotations

import duckdb

from projections.frames.analytics import LAG_SQL, ONE_SIDED_SQL, day, window_whatif
from projections.frames.queries import QUERIES

Table = tuple[list[str], list[tuple[object, ...]]]
EMPTY: Table = ([], [])


def has_tables(con: duckdb.DuckDBPyConnection, *names: str) -> bool:
    """True when every table in ``names`` exists in ``con``'s main schema."""
    rows = con.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'").fetchall()
    have = {str(r[0]) for r in rows}
    return all(n in have for n in names)


def _q(con: duckdb.DuckDBPyConnection, sql: str, *tables: str) -> Table:
    if not has_tables(con, *tables):
        return EMPTY
    cur = con.execute(sql)
    return [d[0] for d in cur.description or []], cur.fetchall()


def totals(con: duckdb.DuckDBPyConnection) -> Table:
    """captures, frames, duplicates, dead letters (the ``totals`` query)."""
    return _q(con, QUERIES["totals"].sql, "frame_captures", "frames", "dead_letters")


def captures_per_day(con: duckdb.DuckDBPyConnection) -> Table:
    """(day, source, captures) per UTC day and source."""
    return _q(con, f"SELECT {day('event_time_ms')} AS day, source, count(*) AS captures FROM frame_captures GROUP BY ALL ORDER BY day, source",
              "frame_captures")


def duplicate_share_per_pair(con: duckdb.DuckDBPyConnection) -> Table:
    """(day, pair ``A → B``, share) as in the ``duplicate-share-per-pair`` query."""
    from projections.frames.analytics import ANALYTICS_QUERIES

    cols, rows = _q(con, ANALYTICS_QUERIES["duplicate-share-per-pair"].sql, "frame_captures", "frames")
    return (["day", "pair", "share"], [(r[0], f"{r[1]} → {r[2]}", r[5]) for r in rows]) if cols else EMPTY


def lag_histogram(con: duckdb.DuckDBPyConnection) -> Table:
    """(bin, pair, duplicates): duplicate lags binned by quarter decades of ms (bin = floor(4·log10(max(lag, 1 ms))) / 4)."""
    return _q(con, """SELECT floor(4 * log10(greatest(abs(c.event_time_ms - coalesce(f.created_at_ms, f.first_seen_ms)), 1))) / 4 AS bin,
                             f.source || ' → ' || c.source AS pair, count(*) AS duplicates
                      FROM frame_captures c JOIN frames f USING (frame_id) WHERE c.is_duplicate
                      GROUP BY ALL ORDER BY bin, pair""", "frame_captures", "frames")


def lag_summary(con: duckdb.DuckDBPyConnection) -> Table:
    """The ``capture-lag`` query (p50, p95, max per source pair)."""
    return _q(con, LAG_SQL, "frame_captures", "frames")


def whatif(con: duckdb.DuckDBPyConnection) -> Table:
    """The ``window-whatif`` answer, empty without captures."""
    if not has_tables(con, "frame_captures", "frames", "meta"):
        return EMPTY
    cols, rows = window_whatif(con)
    return (cols, rows) if rows and any(int(r[2]) for r in rows) else EMPTY  # type: ignore[call-overload]


def one_sided_per_day(con: duckdb.DuckDBPyConnection) -> Table:
    """(day, source, missing_side, turns), the ``one-sided-turns`` query."""
    return _q(con, ONE_SIDED_SQL, "frame_captures", "frames")


def memory_per_day(con: duckdb.DuckDBPyConnection) -> Table:
    """(day, op, calls, errors, empty reads) of ``memory_tool_calls`` per UTC day."""
    return _q(con, f"""SELECT {day('event_time_ms')} AS day, op, count(*) AS calls, count(error) AS errors,
                              count(*) FILTER (WHERE op = 'read' AND results = 0) AS empty_reads
                       FROM memory_tool_calls GROUP BY ALL ORDER BY day, op""", "memory_tool_calls")


def stub_hit_rate(con: duckdb.DuckDBPyConnection) -> Table:
    """(channel, messages, hits, hit_rate) over main-runtime messages."""
    return _q(con, """SELECT channel, count(*) AS messages, count(*) FILTER (WHERE matched) AS hits,
                             round(count(*) FILTER (WHERE matched) / count(*), 4) AS hit_rate
                      FROM stub_messages WHERE origin = 'main' GROUP BY channel ORDER BY channel""", "stub_messages")


def stub_threshold(con: duckdb.DuckDBPyConnection) -> float | None:
    """The match threshold the stub runs used (``stub_meta``), None when unknown."""
    if not has_tables(con, "stub_meta"):
        return None
    row = con.execute("SELECT TRY_CAST(value AS DOUBLE) FROM stub_meta WHERE key = 'threshold'").fetchone()
    return None if row is None or row[0] is None else float(row[0])


def stub_similarity(con: duckdb.DuckDBPyConnection) -> Table:
    """(bin, matched, messages): best similarity per main message in 0.02 bins."""
    return _q(con, """SELECT round(floor(best_similarity * 50) / 50, 2) AS bin, matched, count(*) AS messages
                      FROM stub_messages WHERE origin = 'main' AND best_similarity IS NOT NULL
                      GROUP BY ALL ORDER BY bin, matched""", "stub_messages")


def kb_funnel(con: duckdb.DuckDBPyConnection) -> Table:
    """(stage, count): submissions, then experiences pending / approved / rejected / quarantined."""
    if not has_tables(con, "experiences", "experience_submissions"):
        return EMPTY
    row = con.execute("""SELECT (SELECT count(*) FROM experience_submissions),
                                count(*) FILTER (WHERE status = 'pending'), count(*) FILTER (WHERE status = 'approved'),
                                count(*) FILTER (WHERE status = 'rejected'), count(*) FILTER (WHERE status = 'quarantined')
                         FROM experiences""").fetchone()
    if row is None or not any(row):
        return EMPTY
    return ["stage", "count"], list(zip(["submitted", "pending", "approved", "rejected", "quarantined"], row, strict=True))


def dead_letters(cons: list[tuple[str, duckdb.DuckDBPyConnection]]) -> Table:
    """(pipeline, reason, records) over the frames, KnowHub and stub dead-letter tables present in ``cons``.

    Args:
        cons: (pipeline name, connection) pairs; a connection may hold several pipelines' tables,
            and one file given twice is read once per table.
    """
    rows: list[tuple[object, ...]] = []
    seen: set[tuple[int, str]] = set()
    for _name, con in cons:
        for pipeline, table in (("frames", "dead_letters"), ("knowhub", "kb_dead_letters"), ("stubs", "stub_dead_letters")):
            if (id(con), table) in seen or not has_tables(con, table):
                continue
            seen.add((id(con), table))
            rows += con.execute(f"SELECT ? AS pipeline, reason, count(*) AS records FROM {table} GROUP BY reason", [pipeline]).fetchall()
    rows.sort(key=lambda r: (-int(r[2]), str(r[0]), str(r[1])))  # type: ignore[call-overload]
    return (["pipeline", "reason", "records"], rows) if rows else EMPTY


def top_frames(con: duckdb.DuckDBPyConnection) -> Table:
    """The ``top-frames`` query (20 frames by access_count)."""
    return _q(con, QUERIES["top-frames"].sql, "frames")
