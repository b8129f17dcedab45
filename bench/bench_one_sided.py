"""Benchmark the ``one-sided-turns`` query on one body captured many times.

A projection in memory (the frames schema) with ``--background`` ordinary frames (1-3 captures each,
gateway and backend sessions) and one prompt captured ``N`` times, half by 50 gateway channels, half
by 50 backend sessions (a "continue" every session sends: the case whose self-join of captures was
quadratic). The query (``projections/frames/analytics.py``) is timed for each ``N`` of ``--hot``
(median of ``--runs``), and the anchor is its definition as a self-join of each frame's captures,
timed once at the smallest ``N`` in the same run (the two answers compared there).

Usage: ``python bench/bench_one_sided.py [--hot 40000 62700 400000] [--background 100000] [--runs 3]``.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import duckdb  # noqa: E402

from projections.frames.analytics import GATEWAY_SCOPE, ONE_SIDED_SQL, day  # noqa: E402
from projections.frames.schema import DDL  # noqa: E402

D0 = 1_790_000_000_000

SELF_JOIN = f"""
WITH cap AS (SELECT c.frame_id, c.source, c.session, starts_with(c.session, '{GATEWAY_SCOPE}') AS gw FROM frame_captures c),
turn AS (SELECT f.frame_id, f.first_seen_ms, bool_or(cap.gw) AS has_gw, bool_or(NOT cap.gw) AS has_be
         FROM frames f JOIN cap USING (frame_id)
         WHERE f.event_type IN ('user-prompt-submit', 'stop') GROUP BY f.frame_id, f.first_seen_ms),
paired AS (SELECT a.session FROM cap a JOIN cap b USING (frame_id) WHERE a.gw <> b.gw GROUP BY a.session)
SELECT {day("t.first_seen_ms")} AS day, cap.source,
       CASE WHEN cap.gw THEN 'backend' ELSE 'gateway' END AS missing_side,
       count(DISTINCT t.frame_id) AS turns
FROM turn t JOIN cap USING (frame_id)
WHERE t.has_gw <> t.has_be AND cap.session IN (SELECT session FROM paired)
GROUP BY ALL ORDER BY day, cap.source, missing_side"""
"""The definition the query had before: each frame's captures joined with each other."""


def projection(hot: int, background: int) -> duckdb.DuckDBPyConnection:
    """An in-memory projection: ``background`` frames and one frame captured ``hot`` times."""
    con = duckdb.connect()
    for stmt in DDL:
        con.execute(stmt)
    con.execute(f"""INSERT INTO frames SELECT 'f' || range, 'k' || range, 'h' || range, 'body', 'claude-code', 's' || (range % 500),
                    CASE WHEN range % 2 = 0 THEN 'user-prompt-submit' ELSE 'stop' END, NULL, NULL, 'normal',
                    {D0} + range * 1000, {D0} + range * 1000, {D0} + range * 1000, 1 + range % 3, ['claude-code']
                    FROM range({background})""")
    con.execute(f"""INSERT INTO frame_captures SELECT 'e' || f.range || '-' || c.range, 'f' || f.range,
                    CASE WHEN c.range = 1 THEN 'openclaw' ELSE 'claude-code' END,
                    CASE WHEN c.range = 1 THEN '{GATEWAY_SCOPE}c' || (f.range % 50) ELSE 's' || (f.range % 500) END,
                    'x', {D0} + f.range * 1000 + c.range, c.range > 0, 0, 0, false
                    FROM range({background}) f(range), range(3) c(range) WHERE c.range < 1 + f.range % 3""")
    con.execute(f"""INSERT INTO frames VALUES ('hot', 'khot', 'hhot', 'continue', 'claude-code', 's0', 'user-prompt-submit', NULL, NULL,
                    'normal', {D0}, {D0}, {D0} + {hot}, {hot}, ['claude-code', 'openclaw'])""")
    con.execute(f"""INSERT INTO frame_captures SELECT 'hot-' || range, 'hot', CASE WHEN range % 2 = 0 THEN 'claude-code' ELSE 'openclaw' END,
                    CASE WHEN range % 2 = 0 THEN 's' || (range % 50) ELSE '{GATEWAY_SCOPE}c' || (range % 50) END,
                    'x', {D0} + range, range > 0, 0, 0, false FROM range({hot})""")
    return con


def timed(con: duckdb.DuckDBPyConnection, sql: str) -> tuple[float, list[tuple[object, ...]]]:
    """Seconds and rows of one run of ``sql``."""
    t = time.perf_counter()
    rows = con.execute(sql).fetchall()
    return time.perf_counter() - t, rows


def main() -> None:
    """Time the query per N and the self-join anchor at the smallest N."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--hot", type=int, nargs="+", default=[40_000, 62_700, 400_000])
    ap.add_argument("--background", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    print(f"python {platform.python_version()}, duckdb {duckdb.__version__}, {os.cpu_count()} cpus, {platform.platform()}, "
          f"load average {os.getloadavg()[0]:.1f}")
    anchor = 0.0
    for i, n in enumerate(sorted(a.hot)):
        con = projection(n, a.background)
        times = []
        for _ in range(a.runs):
            s, rows = timed(con, ONE_SIDED_SQL)
            times.append(s)
        med = statistics.median(times)
        line = f"one body captured {n:,} times (+ {a.background:,} frames): one-sided-turns {med:.3f} s (median of {a.runs})"
        if i == 0:
            anchor, ref = timed(con, SELF_JOIN)
            assert ref == rows, "the query and its self-join definition disagree"
            line += f"; anchor, the self-join definition: {anchor:.2f} s (the same {len(rows)} rows); ratio {med / anchor:.4f}"
        print(line, flush=True)
        con.close()


if __name__ == "__main__":
    main()
