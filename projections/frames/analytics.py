"""Frame analytics: the questions memory users ask of the frames projection (``hivestream query NAME``).

All days are UTC, all times epoch ms. Definitions used by several queries:

* **gateway capture**: a capture whose session is ``openclaw-gateway:<channel>`` (how OpenClaw's
  gateway hook scopes it); every other capture is a **backend** capture.
* **project of a frame**: its first writer's ``project:`` token; when the first writer has none (a
  gateway captured the turn first), the project of any of its capturing sessions that first-wrote
  a frame with a project; else ``(none)``.
* **one-sided turn** (docs/analytics.md): a prompt or reply frame (event type
  ``user-prompt-submit`` or ``stop``) captured only by gateway sessions or only by backend sessions,
  where the capturing session is *paired*: it shares at least one frame with a session of the
  other side, so both sides normally capture its turns. Counted per frame, per capturing source,
  on the day of the frame's first capture, with the side whose capture is missing.
* **lag** of a duplicate: ``|its event time - the frame's anchor (first writer's event time)|``,
  the quantity the window W bounds.
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import numpy as np
import numpy.typing as npt

from projections.named_query import NamedQuery

GATEWAY_SCOPE = "openclaw-gateway:"
SHORT_BODY_CHARS = 80
"""A body of at most this many characters (after the ``[hm …]`` prefix) is a "short" body."""

WHATIF_WINDOWS_MS = (1_000, 10_000, 60_000, 600_000, 3_600_000, 86_400_000, 0)
"""The W values of ``window-whatif``, ms; 0 = unbounded."""


def day(col: str) -> str:
    """SQL for the UTC day (``YYYY-MM-DD``) of an epoch-ms column."""
    return f"strftime(to_timestamp({col} / 1000) AT TIME ZONE 'UTC', '%Y-%m-%d')"


FRAME_PROJECT = """frame_project AS (
    SELECT c.frame_id, coalesce(any_value(f.project), any_value(sp.project), '(none)') AS project
    FROM frame_captures c JOIN frames f USING (frame_id)
    LEFT JOIN (SELECT session, any_value(project) AS project FROM frames WHERE project IS NOT NULL GROUP BY session) sp
           ON sp.session = c.session
    GROUP BY c.frame_id)"""

_IS_GW = f"starts_with(c.session, '{GATEWAY_SCOPE}')"

ONE_SIDED_SQL = f"""
WITH cap AS (SELECT c.frame_id, c.source, c.session, {_IS_GW} AS gw FROM frame_captures c),
side AS (SELECT frame_id, bool_or(gw) AS has_gw, bool_or(NOT gw) AS has_be FROM cap GROUP BY frame_id),
turn AS (SELECT f.frame_id, f.first_seen_ms, s.has_gw, s.has_be
         FROM frames f JOIN side s USING (frame_id) WHERE f.event_type IN ('user-prompt-submit', 'stop')),
paired AS (SELECT DISTINCT cap.session FROM cap JOIN side s USING (frame_id)
           WHERE (cap.gw AND s.has_be) OR (NOT cap.gw AND s.has_gw))
SELECT {day("t.first_seen_ms")} AS day, cap.source,
       CASE WHEN cap.gw THEN 'backend' ELSE 'gateway' END AS missing_side,
       count(DISTINCT t.frame_id) AS turns
FROM turn t JOIN cap USING (frame_id)
WHERE t.has_gw <> t.has_be AND cap.session IN (SELECT session FROM paired)
GROUP BY ALL ORDER BY day, cap.source, missing_side"""
"""The ``one-sided-turns`` query. A session is paired when one of its frames was also captured by the
other side: each frame's sides are aggregated once (``side``), so the cost is linear in the captures
(a self-join of the captures per frame was quadratic in one body's captures)."""

LAG_SQL = """
SELECT f.source AS first_source, c.source AS duplicate_source, count(*) AS duplicates,
       quantile_disc(abs(c.event_time_ms - coalesce(f.created_at_ms, f.first_seen_ms)), 0.5) AS p50_ms,
       quantile_disc(abs(c.event_time_ms - coalesce(f.created_at_ms, f.first_seen_ms)), 0.95) AS p95_ms,
       max(abs(c.event_time_ms - coalesce(f.created_at_ms, f.first_seen_ms))) AS max_ms
FROM frame_captures c JOIN frames f USING (frame_id)
WHERE c.is_duplicate GROUP BY ALL ORDER BY duplicates DESC, first_source, duplicate_source"""


def window_label(ms: int) -> str:
    """``0`` → ``unbounded``; ``600000`` → ``10 min``; ``1000`` → ``1 s``; ``86400000`` → ``1 day``."""
    if ms <= 0:
        return "unbounded"
    for unit, size in (("day", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1_000)):
        if ms % size == 0:
            return f"{ms // size} {unit}"
    return f"{ms} ms"


def configured_window_ms(con: duckdb.DuckDBPyConnection) -> int | None:
    """The W the file was built with (table ``meta``; 0 = unbounded), or None when unknown."""
    try:
        row = con.execute("SELECT value FROM meta WHERE key = 'window_ms'").fetchone()
    except duckdb.Error:
        return None
    if row is None or row[0] is None:
        return None
    return 0 if row[0] == "unbounded" else int(row[0]) if str(row[0]).isdigit() else None


def whatif_counts(keys: list[str], times: list[int], window_ms: int) -> tuple[int, int]:
    """(frames, duplicates) for captures sorted by (key, time) under window ``window_ms`` (0 = unbounded).

    Greedy in event-time order, per key: the earliest capture not yet covered anchors a frame, and
    every later capture with ``t - anchor <= W`` joins it (the dedup core's rule with captures
    processed in event-time order; lateness eviction not modelled).
    """
    frames = 0
    prev_key: str | None = None
    anchor = 0
    for k, t in zip(keys, times, strict=True):
        if k != prev_key or (window_ms > 0 and t - anchor > window_ms):
            frames += 1
            anchor, prev_key = t, k
    return frames, len(keys) - frames


def whatif_frames(keys: npt.NDArray[np.int64], times: npt.NDArray[np.int64], windows_ms: Sequence[int]) -> list[int]:
    """The frames :func:`whatif_counts` gives for each window of ``windows_ms``, on arrays: capture
    ``i`` has the key code ``keys[i]`` and the event time ``times[i]`` (epoch ms; any order).

    Vectorized over the keys: the captures are sorted once by (key, time); then each round moves
    every key's anchor to its first capture more than W after it (two binary searches per key), so
    the rounds are as many as the most frames of one key and the work is near-linear in the
    captures, with no Python object per capture (the loop of :func:`whatif_counts` over 400,000
    captures and 7 windows took 0.37 s of interpreter time, holding the GIL serve's ingest needs).
    """
    n = len(times)
    order = np.lexsort((times, keys))
    key_sorted, t_sorted = keys[order], times[order].astype(np.int64)
    starts = np.flatnonzero(np.concatenate(([True], key_sorted[1:] != key_sorted[:-1]))) if n else np.zeros(0, np.int64)
    ends = np.append(starts[1:], n)  # per key: one past its last capture
    gid = np.repeat(np.arange(len(starts), dtype=np.int64), ends - starts)  # the key's number, 0 ... keys - 1
    uniq = np.unique(t_sorted)
    span = np.int64(len(uniq) + 1)
    comp = gid * span + np.searchsorted(uniq, t_sorted)  # non-decreasing: (key number, rank of the time)
    several = starts[ends - starts > 1]  # a key captured once is one frame whatever W
    top = np.iinfo(np.int64).max
    out = []
    for w in windows_ms:
        frames = len(starts)
        if w > 0:
            active = several
            while len(active):
                t = t_sorted[active]
                rank = np.searchsorted(uniq, np.where(t > top - w, top, t + w), side="right")
                g = gid[active]
                nxt = np.searchsorted(comp, g * span + rank, side="left")
                active = nxt[nxt < ends[g]]
                frames += len(active)
        out.append(frames)
    return out


_WHATIF_SQL = """
WITH k AS (SELECT dedup_key, row_number() OVER () AS kid FROM (SELECT DISTINCT dedup_key FROM frames)),
fk AS (SELECT f.frame_id, k.kid FROM frames f JOIN k USING (dedup_key))
SELECT fk.kid, c.event_time_ms AS t FROM frame_captures c JOIN fk USING (frame_id)"""


def window_whatif(con: duckdb.DuckDBPyConnection) -> tuple[list[str], list[tuple[object, ...]]]:
    """The ``window-whatif`` answer: frames and duplicates for each W of :data:`WHATIF_WINDOWS_MS`
    (plus the file's own W), recomputed from every capture in ``frame_captures``
    (:func:`whatif_frames` on a key number and the time of each capture, handed over as arrays).

    Raises:
        duckdb.Error: when the file has no frames tables.
    """
    cols = con.execute(_WHATIF_SQL).fetchnumpy()
    keys = np.asarray(cols["kid"], dtype=np.int64)
    times = np.asarray(cols["t"], dtype=np.int64)
    mine = configured_window_ms(con)
    windows = sorted(set(WHATIF_WINDOWS_MS) | ({mine} if mine is not None else set()), key=lambda w: (w == 0, w))
    n = len(times)
    return ["window", "window_ms", "captures", "frames", "duplicates", "this_file"], [
        (window_label(w), w, n, frames, n - frames, w == mine) for w, frames in zip(windows, whatif_frames(keys, times, windows), strict=True)]


ANALYTICS_QUERIES: dict[str, NamedQuery] = {
    q.name: q
    for q in [
        NamedQuery(
            "duplicate-share-per-day",
            "share of the day's captures that were duplicates (UTC)",
            f"""SELECT {day("event_time_ms")} AS day, count(*) AS captures, count(*) FILTER (WHERE is_duplicate) AS duplicates,
                       round(count(*) FILTER (WHERE is_duplicate) / count(*), 4) AS share
                FROM frame_captures GROUP BY ALL ORDER BY day""",
        ),
        NamedQuery(
            "duplicate-share-per-pair",
            "per day and source pair: duplicates of frames first written by A among source B's captures that day",
            f"""WITH d AS (SELECT {day("c.event_time_ms")} AS day, f.source AS first_source, c.source AS duplicate_source, count(*) AS duplicates
                           FROM frame_captures c JOIN frames f USING (frame_id) WHERE c.is_duplicate GROUP BY ALL),
                     t AS (SELECT {day("event_time_ms")} AS day, source, count(*) AS captures FROM frame_captures GROUP BY ALL)
                SELECT d.day, d.first_source, d.duplicate_source, d.duplicates, t.captures AS duplicate_source_captures,
                       round(d.duplicates / t.captures, 4) AS share
                FROM d JOIN t ON t.day = d.day AND t.source = d.duplicate_source
                ORDER BY d.day, d.first_source, d.duplicate_source""",
        ),
        NamedQuery(
            "duplicate-share-per-project",
            "captures and duplicates per project (the frame's project, see docs/analytics.md)",
            f"""WITH {FRAME_PROJECT}
                SELECT fp.project, count(*) AS captures, count(*) FILTER (WHERE c.is_duplicate) AS duplicates,
                       round(count(*) FILTER (WHERE c.is_duplicate) / count(*), 4) AS share
                FROM frame_captures c JOIN frame_project fp USING (frame_id) GROUP BY ALL ORDER BY captures DESC, fp.project""",
        ),
        NamedQuery(
            "duplicate-share-per-channel",
            "per OpenClaw gateway channel: its captures, how many were duplicates, and of which first source",
            f"""SELECT substr(c.session, {len(GATEWAY_SCOPE) + 1}) AS channel, count(*) AS captures,
                       count(*) FILTER (WHERE c.is_duplicate) AS duplicates,
                       round(count(*) FILTER (WHERE c.is_duplicate) / count(*), 4) AS share,
                       count(*) FILTER (WHERE c.is_duplicate AND f.source <> c.source) AS duplicates_of_other_sources
                FROM frame_captures c JOIN frames f USING (frame_id) WHERE {_IS_GW}
                GROUP BY ALL ORDER BY captures DESC, channel""",
        ),
        NamedQuery(
            "one-sided-turns",
            "prompts/replies only one side captured in a paired gateway/backend session (a broken or missing hook), per source and day",
            ONE_SIDED_SQL,
        ),
        NamedQuery(
            "capture-lag",
            "lag from a frame's first capture to each duplicate, per source pair: p50, p95, max (ms), the data for choosing W",
            LAG_SQL,
        ),
        NamedQuery(
            "window-whatif",
            "frames and duplicates for W = 1 s … unbounded, recomputed from every capture (this_file = the file's own W)",
            "",
            compute=window_whatif,
        ),
        NamedQuery(
            "memory-growth",
            "frames created per day (UTC) and cumulative, per first source and project",
            f"""WITH {FRAME_PROJECT},
                g AS (SELECT {day("f.first_seen_ms")} AS day, f.source, fp.project, count(*) AS frames
                      FROM frames f JOIN frame_project fp USING (frame_id) GROUP BY ALL)
                SELECT day, source, project, frames,
                       sum(frames) OVER (PARTITION BY source, project ORDER BY day ROWS UNBOUNDED PRECEDING) AS cumulative
                FROM g ORDER BY day, source, project""",
        ),
        NamedQuery(
            "resent-short-bodies",
            f"short bodies (≤ {SHORT_BODY_CHARS} characters, e.g. 'continue') that became several frames: re-sent beyond the window",
            f"""SELECT any_value(left(regexp_replace(trim(regexp_replace(content, '^\\[hm [^\\]]*\\]\\s*', '')), '\\s+', ' ', 'g'), 60)) AS body,
                       count(*) AS frames, sum(access_count) AS captures, count(DISTINCT session) AS first_sessions,
                       strftime(to_timestamp(min(first_seen_ms) / 1000) AT TIME ZONE 'UTC', '%Y-%m-%d %H:%M') AS first_utc,
                       strftime(to_timestamp(max(last_accessed_ms) / 1000) AT TIME ZONE 'UTC', '%Y-%m-%d %H:%M') AS last_utc
                FROM frames
                WHERE length(trim(regexp_replace(content, '^\\[hm [^\\]]*\\]\\s*', ''))) <= {SHORT_BODY_CHARS}
                GROUP BY dedup_key HAVING count(*) >= 2 ORDER BY frames DESC, captures DESC, body""",
        ),
    ]
}

MEMORY_QUERIES: dict[str, NamedQuery] = {
    q.name: q
    for q in [
        NamedQuery(
            "memory-reads-per-write",
            "memory tool reads and writes per agent per day (UTC), and reads per write",
            f"""SELECT {day("event_time_ms")} AS day, agent, count(*) FILTER (WHERE op = 'read') AS reads,
                       count(*) FILTER (WHERE op = 'write') AS writes,
                       round(count(*) FILTER (WHERE op = 'read') / nullif(count(*) FILTER (WHERE op = 'write'), 0), 3) AS reads_per_write
                FROM memory_tool_calls GROUP BY ALL ORDER BY day, agent""",
        ),
        NamedQuery(
            "memory-empty-reads",
            "memory reads that returned nothing, per tool and agent (of the reads whose response shows a count)",
            """SELECT tool, agent, count(*) AS reads, count(results) AS counted, count(*) FILTER (WHERE results = 0) AS empty,
                      round(count(*) FILTER (WHERE results = 0) / nullif(count(results), 0), 3) AS empty_share
               FROM memory_tool_calls WHERE op = 'read' AND error IS NULL
               GROUP BY ALL ORDER BY empty DESC, reads DESC, tool, agent""",
        ),
        NamedQuery(
            "memory-tool-errors",
            "memory tool calls that failed, per tool and agent, with an example (redacted)",
            """SELECT tool, agent, count(*) AS calls, count(error) AS errors, round(count(error) / count(*), 3) AS error_rate,
                      min(error) AS example
               FROM memory_tool_calls GROUP BY ALL HAVING count(error) > 0 ORDER BY errors DESC, tool, agent""",
        ),
    ]
}
