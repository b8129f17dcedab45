"""The knowledge base's part of ``hivestream report``: what agents got back (small aggregated tables)."""

from __future__ import annotations

import duckdb

from projections.experiences.queries import MEMORY_USE_SQL, SUBMIT_TO_APPROVAL_SQL
from projections.frames.report_data import EMPTY, Table, has_tables


def memory_use(con: duckdb.DuckDBPyConnection) -> Table:
    """Per agent: searches, zero-hit rate, content fetches, recalls (:data:`projections.experiences.queries.MEMORY_USE_SQL`)."""
    if not has_tables(con, "kb_telemetry"):
        return EMPTY
    cur = con.execute(MEMORY_USE_SQL)
    rows = cur.fetchall()
    return ([d[0] for d in cur.description], rows) if rows else EMPTY


def memory_kpis(con: duckdb.DuckDBPyConnection) -> Table:
    """(measure, value): the median minutes from submission to approval, and the share of reminded sessions that submitted."""
    if not has_tables(con, "experiences", "kb_telemetry", "experience_submissions"):
        return EMPTY
    row = con.execute(SUBMIT_TO_APPROVAL_SQL).fetchone()
    conv = con.execute("""WITH r AS (SELECT session_key, min(event_time_ms) AS first FROM kb_telemetry WHERE kind = 'reminder' GROUP BY ALL)
                          SELECT count(*), count(*) FILTER (WHERE EXISTS (SELECT 1 FROM experience_submissions s WHERE s.kind = 'submitted'
                                 AND s.session_key = r.session_key AND s.event_time_ms >= r.first)) FROM r""").fetchone()
    out: list[tuple[object, ...]] = []
    if row is not None and row[0]:
        out.append(("median minutes from submission to approval", row[1]))
    if conv is not None and conv[0]:
        out.append(("reminded sessions that submitted", f"{conv[1]} of {conv[0]} ({conv[1] / conv[0]:.0%})"))
    return (["measure", "value"], out) if out else EMPTY
