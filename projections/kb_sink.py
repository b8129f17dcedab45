"""The KnowHub projection's writer: one transaction per batch with its rows and positions.

Rows are loaded as Arrow tables with ``INSERT … SELECT`` (``ON CONFLICT DO NOTHING``: every row
is keyed by its event id, so a record applied twice changes nothing); then the ``experiences``
rows of the touched experience ids are derived again from the submissions and reviews
(:data:`projections.kb_schema.REFRESH_EXPERIENCES`). The dedup state and the reminder counters
are stored in the same transaction, so a restarted runner or projector resumes with both.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from projections.kb_schema import KB_DDL, REFRESH_EXPERIENCES
from streams.experiences.fold import KbBatch

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


class KbSink:
    """Writer of the KnowHub tables in one DuckDB file (created with :data:`KB_DDL` when missing).

    Raises:
        duckdb.IOException: when another process holds the file.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self.con = duckdb.connect(self.path)
        for stmt in KB_DDL:
            self.con.execute(stmt)
        self.con.execute("CREATE TABLE IF NOT EXISTS kb_reminder_counters (session_key VARCHAR PRIMARY KEY, n INTEGER NOT NULL)")
        self.con.execute("CREATE TABLE IF NOT EXISTS kb_hooks_seen (event_id VARCHAR PRIMARY KEY)")

    def close(self) -> None:
        """Checkpoint and close the file."""
        self.con.execute("CHECKPOINT")
        self.con.close()

    def __enter__(self) -> KbSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def position(self, input_name: str, partition: int = 0) -> int:
        """The first offset of ``input_name`` (and ``partition``) not yet applied (0 when none)."""
        row = self.con.execute("SELECT next_offset FROM kb_positions WHERE input = ? AND src_partition = ?", [input_name, partition]).fetchone()
        return int(row[0]) if row else 0

    def load_dedup_state(self) -> dict[str, Any]:
        """The experience dedup state (:class:`~streams.frames.dedup.DedupCore` entries by dedup key) as the last batch stored it."""
        return {k: json.loads(v) for k, v in self.con.execute("SELECT dedup_key, value FROM kb_dedup_state").fetchall()}

    def load_counters(self) -> dict[str, int]:
        """The reminder counters (session key → ``before_prompt_build`` calls since ``agent_end``)."""
        return {k: int(n) for k, n in self.con.execute("SELECT session_key, n FROM kb_reminder_counters").fetchall()}

    def load_seen_hooks(self) -> set[str]:
        """Ids of the plugin-hook markers already counted."""
        return {r[0] for r in self.con.execute("SELECT event_id FROM kb_hooks_seen").fetchall()}

    def apply_batch(self, b: KbBatch, positions: Mapping[tuple[str, int], int], counters: Mapping[str, int] | None = None) -> None:
        """Write ``b``, the next ``positions`` and the reminder ``counters`` (replacing the stored ones) in one transaction.

        Raises:
            duckdb.Error: on a database failure; the transaction is rolled back.
        """
        con = self.con
        con.execute("BEGIN TRANSACTION")
        try:
            if b.submissions:
                con.register("_s", pa.Table.from_pylist(b.submissions, schema=_SUB_SCHEMA))
                con.execute("INSERT INTO experience_submissions SELECT * FROM _s QUALIFY row_number() OVER (PARTITION BY event_id) = 1 ON CONFLICT DO NOTHING")
                con.unregister("_s")
            if b.redactions:
                con.executemany("INSERT INTO experience_redactions VALUES (?, ?, ?) ON CONFLICT DO NOTHING", [list(r) for r in b.redactions])
            if b.reviews:
                con.executemany("INSERT INTO experience_reviews VALUES ($event_id, $experience_id, $decision, $reviewer, $reason, $event_time_ms) "
                                "ON CONFLICT DO NOTHING", b.reviews)
            if b.telemetry:
                con.register("_t", pa.Table.from_pylist(b.telemetry, schema=_TEL_SCHEMA))
                con.execute("INSERT INTO kb_telemetry SELECT * FROM _t QUALIFY row_number() OVER (PARTITION BY event_id) = 1 ON CONFLICT DO NOTHING")
                con.unregister("_t")
            if b.dead_letters:
                con.executemany("INSERT INTO kb_dead_letters VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                                [[f"{d.source}[{d.partition}]", d.offset, d.event_id, str(d.reason), d.detail, d.original(), d.time_ms]
                                 for d in b.dead_letters])
            if b.touched:
                con.register("_touched", pa.table({"id": sorted(b.touched)}))
                con.execute(REFRESH_EXPERIENCES)
                con.unregister("_touched")
            if b.hooks:
                con.executemany("INSERT INTO kb_hooks_seen VALUES (?) ON CONFLICT DO NOTHING", [[h] for h in b.hooks])
            if counters is not None:
                con.execute("DELETE FROM kb_reminder_counters")
                if counters:
                    con.executemany("INSERT INTO kb_reminder_counters VALUES (?, ?)", [[k, int(v)] for k, v in sorted(counters.items())])
            upserts, deletes = b.state_changes
            if upserts:
                con.executemany("INSERT OR REPLACE INTO kb_dedup_state VALUES (?, ?)", [[k, json.dumps(v)] for k, v in upserts.items()])
            if deletes:
                con.executemany("DELETE FROM kb_dedup_state WHERE dedup_key = ?", [[k] for k in deletes])
            if positions:
                con.executemany("""INSERT INTO kb_positions VALUES (?, ?, ?) ON CONFLICT DO UPDATE
                                   SET next_offset = greatest(next_offset, excluded.next_offset)""", [[i, p, o] for (i, p), o in positions.items()])
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise

