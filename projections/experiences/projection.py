"""The KnowHub projection: experiences, submissions, reviews and telemetry, one transaction per batch.

Every table's rows are loaded as one Arrow table per batch with one ``INSERT … SELECT`` (DuckDB's
``executemany`` prepares and runs a statement per row). Inserts are ``ON CONFLICT DO NOTHING``:
every row is keyed by its event id, so a record applied twice changes nothing; within a batch the
first row per key is kept (``QUALIFY row_number() … = 1``, as ``executemany`` did, since DuckDB
rejects a key twice in one statement). Then the ``experiences`` rows of the touched experience ids
are derived again from the submissions and reviews (:data:`projections.experiences.schema.REFRESH_EXPERIENCES`).
The dedup state and the reminder counters are stored in the same transaction, so a restarted
runner or projector resumes with both. A :class:`~projections.projection.Projection`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import duckdb
import pyarrow as pa

from projections.experiences.schema import KB_DDL, REFRESH_EXPERIENCES
from projections.projection import Projection
from streams.experiences.fold import ExperienceChanges

_SUB_SCHEMA = pa.schema([
    ("event_id", pa.string()), ("experience_id", pa.string()), ("dedup_key", pa.string()), ("kind", pa.string()), ("task", pa.string()),
    ("resource", pa.string()), ("result", pa.string()), ("confidence", pa.float64()), ("agent_id", pa.string()), ("submitted_by", pa.string()),
    ("session_key", pa.string()), ("source_tool", pa.string()), ("runtime", pa.string()), ("privacy_mode", pa.string()),
    ("redaction_count", pa.int32()), ("injection_rules", pa.list_(pa.string())), ("requires_review", pa.bool_()), ("anchor_ms", pa.int64()),
    ("event_time_ms", pa.int64()), ("is_duplicate", pa.bool_()),
])
_TEL_SCHEMA = pa.schema([
    ("event_id", pa.string()), ("kind", pa.string()), ("session_key", pa.string()), ("agent_id", pa.string()), ("query", pa.string()),
    ("agent_filter", pa.string()), ("hit_count", pa.int32()), ("experience_ref", pa.string()), ("trigger", pa.string()), ("llm_call", pa.int32()),
    ("runtime", pa.string()), ("event_time_ms", pa.int64()),
])


_RED_SCHEMA = pa.schema([("event_id", pa.string()), ("kind", pa.string()), ("n", pa.int32())])
_REV_SCHEMA = pa.schema([
    ("event_id", pa.string()), ("experience_id", pa.string()), ("decision", pa.string()), ("reviewer", pa.string()), ("reason", pa.string()),
    ("event_time_ms", pa.int64()),
])
_DL_SCHEMA = pa.schema([
    ("input", pa.string()), ("src_offset", pa.int64()), ("event_key", pa.string()), ("reason", pa.string()), ("detail", pa.string()),
    ("original", pa.binary()), ("time_ms", pa.int64()),
])


def _load(con: duckdb.DuckDBPyConnection, table: pa.Table, sql: str) -> None:
    """Run ``sql`` (which reads the view ``_rows``) with ``table`` registered as ``_rows``.

    Raises:
        duckdb.Error: on a database failure (the view is unregistered either way).
    """
    con.register("_rows", table)
    try:
        con.execute(sql)
    finally:
        con.unregister("_rows")


@dataclass(frozen=True)
class ExperienceBatch:
    """One batch of the KnowHub projection: the fold's rows (:class:`~streams.experiences.fold.ExperienceChanges`,
    its dedup state changes included) and the reminder counters after it (session key → count,
    replacing the stored ones; ``None``: kept as stored)."""

    rows: ExperienceChanges
    counters: Mapping[str, int] | None = None


KB_EXTRA_DDL = [
    "CREATE TABLE IF NOT EXISTS kb_reminder_counters (session_key VARCHAR PRIMARY KEY, n INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS kb_hooks_seen (event_id VARCHAR PRIMARY KEY)",
]
"""The fold's own state beside the KnowHub tables: reminder counters and the plugin-hook markers counted."""


class ExperienceProjection(Projection[ExperienceBatch, None]):
    """The KnowHub projection (tables :data:`KB_DDL` and :data:`KB_EXTRA_DDL`; positions in
    ``kb_positions``), made as :class:`projections.projection.Projection` is (e.g. on a cursor of
    the frames projection's connection, so both projections of one file are written by one process).

    Raises:
        duckdb.IOException: when another process holds the file.
    """

    name = "experiences"
    ddl = (*KB_DDL, *KB_EXTRA_DDL)
    positions_table = "kb_positions"

    def load_dedup_state(self) -> dict[str, Any]:
        """The experience dedup state (:class:`~streams.frames.dedup.DedupFold` entries by dedup key) as the last batch stored it."""
        return {k: json.loads(v) for k, v in self.con.execute("SELECT dedup_key, value FROM kb_dedup_state").fetchall()}

    def load_counters(self) -> dict[str, int]:
        """The reminder counters (session key → ``before_prompt_build`` calls since ``agent_end``)."""
        return {k: int(n) for k, n in self.con.execute("SELECT session_key, n FROM kb_reminder_counters").fetchall()}

    def load_seen_hooks(self) -> set[str]:
        """Ids of the plugin-hook markers already counted."""
        return {r[0] for r in self.con.execute("SELECT event_id FROM kb_hooks_seen").fetchall()}

    def write(self, batch: ExperienceBatch) -> None:
        """Write one batch's rows, the dedup state changes and the reminder counters inside the caller's transaction.

        Raises:
            duckdb.Error: on a database failure.
        """
        con, b = self.con, batch.rows
        if b.submissions:
            _load(con, pa.Table.from_pylist(b.submissions, schema=_SUB_SCHEMA),
                  "INSERT INTO experience_submissions SELECT * FROM _rows QUALIFY row_number() OVER (PARTITION BY event_id) = 1 ON CONFLICT DO NOTHING")
        if b.redactions:
            ev, kind, n = zip(*b.redactions, strict=True)
            _load(con, pa.table([list(ev), list(kind), list(n)], schema=_RED_SCHEMA),
                  "INSERT INTO experience_redactions SELECT * FROM _rows QUALIFY row_number() OVER (PARTITION BY event_id, kind) = 1 "
                  "ON CONFLICT DO NOTHING")
        if b.reviews:
            _load(con, pa.Table.from_pylist(b.reviews, schema=_REV_SCHEMA),
                  "INSERT INTO experience_reviews SELECT * FROM _rows QUALIFY row_number() OVER (PARTITION BY event_id) = 1 ON CONFLICT DO NOTHING")
        if b.telemetry:
            _load(con, pa.Table.from_pylist(b.telemetry, schema=_TEL_SCHEMA),
                  "INSERT INTO kb_telemetry SELECT * FROM _rows QUALIFY row_number() OVER (PARTITION BY event_id) = 1 ON CONFLICT DO NOTHING")
        if b.dead_letters:
            cols = list(zip(*[(f"{d.source}[{d.partition}]", d.offset, d.event_id, str(d.reason), d.detail, d.original(), d.time_ms)
                              for d in b.dead_letters], strict=True))
            _load(con, pa.table([list(c) for c in cols], schema=_DL_SCHEMA),
                  "INSERT INTO kb_dead_letters SELECT * FROM _rows QUALIFY row_number() OVER (PARTITION BY input, src_offset, event_key) = 1 "
                  "ON CONFLICT DO NOTHING")
        if b.touched:
            con.register("_touched", pa.table({"id": sorted(b.touched)}))
            con.execute(REFRESH_EXPERIENCES)
            con.unregister("_touched")
        if b.hooks:
            _load(con, pa.table({"event_id": b.hooks}), "INSERT INTO kb_hooks_seen SELECT DISTINCT event_id FROM _rows ON CONFLICT DO NOTHING")
        self._write_state(b, batch.counters)

    def _write_state(self, b: ExperienceChanges, counters: Mapping[str, int] | None) -> None:
        """The reminder counters (replaced when given) and the dedup state changes of ``b``."""
        con = self.con
        if counters is not None:
            con.execute("DELETE FROM kb_reminder_counters")
            if counters:
                keys = sorted(counters)
                _load(con, pa.table({"session_key": keys, "n": pa.array([int(counters[k]) for k in keys], pa.int32())}),
                      "INSERT INTO kb_reminder_counters SELECT * FROM _rows")
        upserts, deletes = b.state_changes  # a dict and the keys no longer in it: each key once
        if upserts:
            _load(con, pa.table({"dedup_key": list(upserts), "value": [json.dumps(v) for v in upserts.values()]}),
                  "INSERT OR REPLACE INTO kb_dedup_state SELECT * FROM _rows")
        if deletes:
            _load(con, pa.table({"dedup_key": list(deletes)}), "DELETE FROM kb_dedup_state WHERE dedup_key IN (SELECT dedup_key FROM _rows)")


"""The KnowHub projection's earlier name."""
