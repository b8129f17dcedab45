"""Named analytics queries over a projection file (``hivestream query NAME``)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import duckdb


@dataclass(frozen=True)
class NamedQuery:
    """A named SQL query and what it answers.

    ``compute``, when set, answers instead of ``sql`` (a computation SQL cannot express, e.g. the
    window what-if): it takes the connection and returns (column names, rows).
    """

    name: str
    description: str
    sql: str
    compute: Callable[[duckdb.DuckDBPyConnection], tuple[list[str], list[tuple[object, ...]]]] | None = None


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
            "dead-lettered records per reason and input",
            """SELECT reason, input, count(*) AS records, any_value(detail) AS example
               FROM dead_letters GROUP BY ALL ORDER BY records DESC, reason""",
        ),
    ]
}


def run_query(
    con: duckdb.DuckDBPyConnection, name: str, queries: dict[str, NamedQuery] | None = None
) -> tuple[list[str], list[tuple[object, ...]]]:
    """Run the named query of ``queries`` (default: the frames queries, :data:`QUERIES`) on ``con``.

    Returns:
        (column names, rows).

    Raises:
        KeyError: for an unknown name (the message lists the known ones).
        duckdb.Error: when the file lacks the tables the query reads.
    """
    queries = QUERIES if queries is None else queries
    if name not in queries:
        raise KeyError(f"unknown query {name!r}; known: {', '.join(sorted(queries))}")
    compute = queries[name].compute
    if compute is not None:
        return compute(con)
    cur = con.execute(queries[name].sql)
    cols = [d[0] for d in cur.description or []]
    return cols, cur.fetchall()


def open_for_reading(db: Path) -> tuple[duckdb.DuckDBPyConnection, str]:
    """Open ``db`` read-only, or its published snapshot while a projector holds it.

    Returns:
        (connection, a sentence that says how fresh the answer is).

    Raises:
        FileNotFoundError: when neither the file nor a snapshot exists, the file is locked and no
            snapshot was published yet, or the file is no readable DuckDB file (DuckDB's reason).
    """
    from projections.sink import heartbeat_path, snapshot_path

    snap = snapshot_path(db)
    if db.exists():
        try:
            return duckdb.connect(str(db), read_only=True), f"answered from {db} (no writer holds it: up to date)"
        except duckdb.Error as e:
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            if "lock" not in str(e).lower():  # not a writer's lock: a directory, not a DuckDB file, ...
                raise FileNotFoundError(f"cannot read {db} as a DuckDB file: {first}") from None
            if not snap.exists():
                raise FileNotFoundError(f"{db} is held by a writer and no snapshot {snap} was published yet") from None
    if not snap.exists():
        raise FileNotFoundError(f"no such DuckDB file: {db}")
    con = duckdb.connect(str(snap), read_only=True)
    row = con.execute("SELECT published_at_ms, positions FROM snapshot_info").fetchone()
    published, positions = (int(row[0]), json.loads(row[1])) if row else (0, [])
    age_s = max(0.0, time.time() - published / 1000)
    covered = ", ".join(f"{t}[{p}]@{o}" for t, p, o in positions[:8])
    beat = ""
    hb = heartbeat_path(db)
    if hb.exists():
        try:
            checked = int(json.loads(hb.read_text())["checked_at_ms"])
            beat = f"; the projector last checked for new records {max(0.0, time.time() - checked / 1000):.1f} s ago"
        except (ValueError, KeyError, OSError):
            beat = ""
    return con, (f"answered from the snapshot {snap} published {age_s:.1f} s ago (a writer holds {db}){beat}; "
                 f"positions: {covered}")
