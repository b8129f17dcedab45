"""The DuckDB sink: one transaction per batch holding the rows and the consumed positions.

Following eventsourcing's "tracking record in the same transaction as the projection": a crash
(kill -9) at any moment either applies a whole batch with its positions or none of it, and a
re-delivered event (same event id) changes nothing.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from projections.duck_file import check_duckdb_file
from projections.frames.dedup_state import load_since_sweep, load_state, write_since_sweep, write_state
from projections.frames.file_copy import HeldFileCopy
from projections.frames.fingerprints import Fingerprints, Hashes
from projections.frames.memory_calls import apply_memory_calls, ensure_memory_schema
from projections.frames.rows import CAPTURE_COLUMNS, capture_columns
from projections.frames.schema import DDL
from streams.frames.capture import Skipped
from streams.frames.dedup import FrameEvent
from streams.memory_calls import MemoryToolCall
from streams.model.deadletter import DeadLetter

# One row per frame of the batch's new captures; the first created capture (lowest seq) is the writer.
_FRAME_AGG = """
SELECT frame_id,
       any_value(dedup_key) AS dedup_key, any_value(body_hash) AS body_hash,
       arg_min(content, seq) FILTER (WHERE NOT is_duplicate) AS content,
       arg_min(source, seq) FILTER (WHERE NOT is_duplicate) AS source,
       arg_min(session, seq) FILTER (WHERE NOT is_duplicate) AS session,
       arg_min(event_type, seq) FILTER (WHERE NOT is_duplicate) AS event_type,
       arg_min(parent, seq) FILTER (WHERE NOT is_duplicate) AS parent,
       arg_min(project, seq) FILTER (WHERE NOT is_duplicate) AS project,
       arg_min(importance, seq) FILTER (WHERE NOT is_duplicate) AS importance,
       min(frame_time_ms) AS created_at_ms,
       min(event_time_ms) AS first_seen_ms, max(event_time_ms) AS last_accessed_ms, count(*) AS access_count,
       list_sort(list_distinct(list(source))) AS sources
FROM {src} GROUP BY frame_id
"""

# MERGE needs no index on frames (an ART index costs insert and checkpoint time and stays in
# memory). The first branch is the full fold (a frame first seen through a touch gets its
# writer's fields, or the batch holds its created capture); the others leave the writer's fields
# alone, since coalesce(old, NULL) is old, and rewrite the list column only when a source is new.
_MERGE_FRAMES = """
MERGE INTO frames f USING _hit n ON f.rowid = n.rid
WHEN MATCHED AND (f.source IS NULL OR n.source IS NOT NULL) THEN UPDATE SET
    content = coalesce(f.content, n.content), source = coalesce(f.source, n.source),
    session = coalesce(f.session, n.session), event_type = coalesce(f.event_type, n.event_type),
    parent = coalesce(f.parent, n.parent), project = coalesce(f.project, n.project),
    importance = coalesce(f.importance, n.importance), created_at_ms = coalesce(f.created_at_ms, n.created_at_ms),
    first_seen_ms = least(f.first_seen_ms, n.first_seen_ms), last_accessed_ms = greatest(f.last_accessed_ms, n.last_accessed_ms),
    access_count = f.access_count + n.access_count, sources = list_sort(list_distinct(list_concat(f.sources, n.sources)))
WHEN MATCHED AND NOT list_has_all(f.sources, n.sources) THEN UPDATE SET
    created_at_ms = coalesce(f.created_at_ms, n.created_at_ms),
    first_seen_ms = least(f.first_seen_ms, n.first_seen_ms), last_accessed_ms = greatest(f.last_accessed_ms, n.last_accessed_ms),
    access_count = f.access_count + n.access_count, sources = list_sort(list_distinct(list_concat(f.sources, n.sources)))
WHEN MATCHED THEN UPDATE SET
    created_at_ms = coalesce(f.created_at_ms, n.created_at_ms),
    first_seen_ms = least(f.first_seen_ms, n.first_seen_ms), last_accessed_ms = greatest(f.last_accessed_ms, n.last_accessed_ms),
    access_count = f.access_count + n.access_count
"""

_INSERT_CAPTURES = """INSERT INTO frame_captures SELECT event_id, frame_id, source, session, event_type, event_time_ms,
                      is_duplicate, src_partition, src_offset, is_late FROM {src}"""

# the details of the new rows of {src} (captures or skipped events) → event_details_json (the view event_details reads it)
_INSERT_DETAILS = "INSERT INTO event_details_json SELECT event_id, details FROM {src} WHERE details IS NOT NULL"

SKIPPED_SCHEMA: tuple[tuple[str, pa.DataType], ...] = tuple(zip(Skipped._fields, (
    pa.string(), pa.string(), pa.string(), pa.string(), pa.string(), pa.string(), pa.string(), pa.int64(), pa.int32(), pa.int64(),
    pa.string()), strict=True))
_INSERT_SKIPPED = """INSERT INTO skipped_events SELECT event_id, reason, source, session, event_type, native_event, project,
                     event_time_ms, "partition", "offset" FROM {src}"""


# DuckDB's memory limit per writer (its default, 80 % of RAM, let the buffer cache keep every block
# it scanned). The rows not yet checkpointed live in that memory: at 256 MB with a 256 MB WAL
# threshold they spilled to temporary files (zstd) at 2M captures, ~1 µs of CPU per capture more
# than at 200k (at 512 MB no spill, but peak RSS 888 MiB).
DEFAULT_MEMORY_LIMIT = "320MB"
# DuckDB checkpoints once its WAL passes this. At its default (16 MB) every batch of the runner
# (~25 MB of WAL per 50,000 captures) checkpointed, and each checkpoint recompressed the tables'
# partly filled last row groups again: ~14 µs of CPU per capture once the file held a few row
# groups. At 128 MB a checkpoint came every ~5 batches, and at 2M captures some cost
# 2.9 s where others cost 0.8 (10 s in all; 15.6 s at 64 MB, 7.4 s at 256 MB). With the memory
# limit above, 192 MB (a checkpoint every ~8 batches) left the runner's CPU per capture at 2M
# where it is at 200k, peak RSS 707 MiB. A restart after a crash replays at most this
# much WAL.
CHECKPOINT_THRESHOLD = "192MB"
RECENT_BATCHES = 4  # a batch's frames already in the table are looked for first among the rows the last 4 batches wrote

CAPTURE_SCHEMA: tuple[tuple[str, pa.DataType], ...] = tuple(zip(CAPTURE_COLUMNS, (
    pa.string(), pa.string(), pa.bool_(), pa.string(), pa.string(), pa.string(), pa.string(), pa.string(), pa.string(),
    pa.string(), pa.string(), pa.string(), pa.int64(), pa.int64(), pa.int32(), pa.int64(), pa.int64(), pa.bool_(), pa.string(),
), strict=True))


class MetaMismatch(RuntimeError):
    """The file was built with other dedup settings (key strategy or window)."""


class DuckSink:
    """Writer of one DuckDB projection file (one writer process per file, docs/design.md#projections).

    Args:
        path: the DuckDB file; created with the schema when missing.
        memory_limit: DuckDB's ``memory_limit`` for this connection (e.g. ``"256MB"``), else
            ``HIVESTREAM_DUCKDB_MEMORY_LIMIT``, else :data:`DEFAULT_MEMORY_LIMIT`. DuckDB's default
            (80 % of RAM) lets its buffer cache keep every block it ever scanned, so the writer's
            memory grew with the file; blocks over the limit are dropped from the cache (and read
            again from the file), intermediate results spill to a temporary directory.
        threads: DuckDB's ``threads`` for this connection, else DuckDB's default (one per core).
            ``hivestream run --jobs N`` passes 1: its import processes hold the other cores, and
            DuckDB's second thread only competed with them (the runner's CPU per capture
            1.5 µs less, its time ~4 % shorter, in four paired runs of 200k events).

    The connection checkpoints after :data:`CHECKPOINT_THRESHOLD` of WAL (a commit is durable in
    the WAL either way; a restart after a crash replays at most that much).

    Raises:
        duckdb.IOException: when another process holds the file, or it is not a DuckDB file
            (:func:`projections.duck_file.check_duckdb_file`).
        duckdb.ParserException: for a memory limit DuckDB cannot read, or a negative one (the message names it).
    """

    def __init__(self, path: str | Path, *, memory_limit: str | None = None, threads: int | None = None) -> None:
        self.path = str(path)
        limit = memory_limit or os.environ.get("HIVESTREAM_DUCKDB_MEMORY_LIMIT") or DEFAULT_MEMORY_LIMIT
        config: dict[str, str | bool | int | float | list[str]] = {"memory_limit": limit, "checkpoint_threshold": CHECKPOINT_THRESHOLD}
        if threads is not None:
            config["threads"] = threads
        if limit.strip().startswith("-"):  # DuckDB reads a negative limit as its default, 80 % of RAM
            raise duckdb.ParserException(f"memory limit {limit!r} (HIVESTREAM_DUCKDB_MEMORY_LIMIT): must not be negative")
        check_duckdb_file(self.path)
        try:
            self.con = duckdb.connect(self.path, config=config)
        except duckdb.ParserException as e:  # the memory limit is the one setting here a user writes
            raise duckdb.ParserException(f"memory limit {limit!r} (HIVESTREAM_DUCKDB_MEMORY_LIMIT): {e}") from e
        for stmt in DDL:
            self.con.execute(stmt)
        ensure_memory_schema(self.con)
        # fingerprints of frame_captures.event_id ∪ frames.frame_id (read on the first batch), what
        # the open transaction adds to them, and the frames row counts before the last batches
        self._ids: Fingerprints | None = None
        self._skipped_ids: Fingerprints | None = None  # of skipped_events.event_id, read on the first batch that has skipped events
        self._adding: tuple[Hashes, Hashes] | None = None
        self._adding_skipped: Hashes | None = None
        self._marks: list[int] = []
        self.file_copy = HeldFileCopy(self.path)  # the snapshot's byte copies (projections/frames/file_copy.py)

    def close(self) -> None:
        """Checkpoint and close the file (then the copies' descriptor: closing it earlier would drop DuckDB's lock)."""
        try:
            self.con.execute("CHECKPOINT")
            self.con.close()
        finally:
            self.file_copy.close()

    def __enter__(self) -> DuckSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- settings guard -------------------------------------------------------------------
    def check_meta(self, settings: Mapping[str, str]) -> None:
        """Record ``settings`` on first use; afterwards require the same values.

        Raises:
            MetaMismatch: when the file was built with different values (mixing two key
                strategies or windows in one projection would make it meaningless).
        """
        rows = dict(self.con.execute("SELECT key, value FROM meta").fetchall())
        for k, v in settings.items():
            if k in rows and rows[k] != v:
                raise MetaMismatch(f"{self.path} was built with {k}={rows[k]}, not {v}: use a new --db file (or reprocess)")
        self.con.executemany("INSERT INTO meta VALUES (?, ?) ON CONFLICT DO NOTHING", list(settings.items()))

    # --- positions --------------------------------------------------------------------------
    def position(self, input_name: str, partition: int = 0) -> int:
        """The first offset of ``input_name``/``partition`` not yet applied (0 when none)."""
        row = self.con.execute(
            "SELECT next_offset FROM positions WHERE input = ? AND src_partition = ?",
            [input_name, partition],
        ).fetchone()
        return int(row[0]) if row else 0

    def positions(self, input_name: str) -> dict[int, int]:
        """All stored positions of ``input_name`` as partition → next offset."""
        rows = self.con.execute(
            "SELECT src_partition, next_offset FROM positions WHERE input = ?", [input_name]
        ).fetchall()
        return {int(p): int(o) for p, o in rows}

    # --- dedup state (embedded runner) ----------------------------------------------------
    def load_dedup_state(self) -> dict[str, Any]:
        """The dedup core's state as stored by the last committed batch (key → frames list; :func:`load_state`)."""
        return load_state(self.con)

    def load_since_sweep(self) -> int:
        """The dedup core's captures since its last sweep, as the last committed batch stored it (:func:`load_since_sweep`)."""
        return load_since_sweep(self.con)

    # --- the batch ------------------------------------------------------------------------
    def apply_batch(
        self,
        frame_events: Iterable[FrameEvent],
        dead_letters: Iterable[DeadLetter] = (),
        positions: Mapping[tuple[str, int], int] | None = None,
        state_changes: tuple[Mapping[str, Any], Iterable[str]] | None = None,
        memory_calls: Iterable[MemoryToolCall] = (),
        since_sweep: int | None = None,
        skipped: Sequence[Skipped] = (),
    ) -> tuple[int, int, int]:
        """Apply one batch of frame events in one transaction (see :meth:`apply_columns`).

        Args:
            frame_events: created/touched events, in processing order.
            dead_letters, positions, state_changes, memory_calls, since_sweep, skipped: as in :meth:`apply_columns`.
        """
        return self.apply_columns(capture_columns(frame_events), dead_letters, positions, state_changes, memory_calls, since_sweep,
                                  skipped)

    def apply_columns(
        self,
        captures: Mapping[str, Sequence[Any]],
        dead_letters: Iterable[DeadLetter] = (),
        positions: Mapping[tuple[str, int], int] | None = None,
        state_changes: tuple[Mapping[str, Any], Iterable[str]] | None = None,
        memory_calls: Iterable[MemoryToolCall] = (),
        since_sweep: int | None = None,
        skipped: Sequence[Skipped] = (),
    ) -> tuple[int, int, int]:
        """Apply one batch in one transaction.

        Args:
            captures: the batch's capture columns (:data:`projections.frames.rows.CAPTURE_COLUMNS`, as
                :func:`projections.frames.rows.capture_columns`,
                :func:`projections.frames.decode.decode_frame_records` or
                :meth:`hivestream.embedded.blocks.BatchColumns.columns` make them: sequences of Python
                values or Arrow arrays), ``seq`` in processing order.
            dead_letters: rejected records to record (idempotent on input/partition/offset).
            positions: (input, partition) → next offset to store with the rows.
            state_changes: (dedup keys set → frames list, keys deleted), stored with the rows.
            memory_calls: memory tool calls for ``memory_tool_calls`` (idempotent on event id).
            since_sweep: the dedup core's captures since its last sweep after the batch, stored
                with the state (:func:`projections.frames.dedup_state.write_since_sweep`); ``None``: not stored.
            skipped: valid events that are not turns, for ``skipped_events`` (idempotent on event id, as
                captures are; their details, like the captures', go to ``event_details``).

        Returns:
            (new frames, new duplicate captures, new dead letters) applied; re-delivered
            event ids and dead letters already recorded count in none.

        Raises:
            duckdb.Error: on a database failure; the transaction is rolled back.
            pyarrow.ArrowInvalid, pyarrow.ArrowTypeError: when a column value does not fit its
                type (nothing is written).
        """
        batch = pa.table({name: _column(captures[name], t) for name, t in CAPTURE_SCHEMA})
        dl = list(dead_letters)
        con = self.con
        con.execute("BEGIN TRANSACTION")
        try:
            applied = (0, 0)
            if batch.num_rows:
                applied = self._apply_captures(batch)
            if skipped:
                self._apply_skipped(skipped)
            new_dl = 0
            if dl:
                ((before,),) = con.execute("SELECT count(*) FROM dead_letters").fetchall()
                con.executemany(
                    "INSERT INTO dead_letters VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    [[d.source, d.partition, d.offset, d.event_id, str(d.reason), d.detail, d.original(), d.time_ms] for d in dl],
                )
                ((after,),) = con.execute("SELECT count(*) FROM dead_letters").fetchall()  # fetchall: a result left open blocks register()
                new_dl = int(after) - int(before)
            apply_memory_calls(con, memory_calls)
            if positions:
                con.executemany(
                    """INSERT INTO positions VALUES (?, ?, ?) ON CONFLICT DO UPDATE
                       SET next_offset = greatest(next_offset, excluded.next_offset)""",
                    [[i, p, o] for (i, p), o in positions.items()],
                )
            if state_changes:
                write_state(con, *state_changes)
            if since_sweep is not None:
                write_since_sweep(con, since_sweep)
            con.execute("COMMIT")
            if self._adding is not None and self._ids is not None:
                self._ids.add(np.union1d(*self._adding))
            if self._adding_skipped is not None and self._skipped_ids is not None:
                self._skipped_ids.add(self._adding_skipped)
            return applied[0], applied[1], new_dl
        except BaseException:
            with contextlib.suppress(duckdb.Error):  # none left when a COMMIT failed (a full disk): the first error is the one to tell
                con.execute("ROLLBACK")
            raise
        finally:
            self._adding = None
            self._adding_skipped = None

    def _apply_skipped(self, skipped: Sequence[Skipped]) -> None:
        """Insert the skipped events whose event id is new (not in ``skipped_events``, not earlier in
        the batch) and their details, as :meth:`_apply_captures` does for captures: the exact anti
        join runs only when an id's fingerprint is already held or the batch repeats an id."""
        con = self.con
        if self._skipped_ids is None:
            self._skipped_ids = Fingerprints(np.unique(_hashes(con, "SELECT hash(event_id) AS h FROM skipped_events")))
        table = pa.table({name: pa.array([s[i] for s in skipped], type=t) for i, (name, t) in enumerate(SKIPPED_SCHEMA)})
        con.register("_skipped", table)
        try:
            hashes = _hashes(con, "SELECT hash(event_id) AS h FROM _skipped")
            src = "_skipped"
            if self._skipped_ids.maybe(hashes).any() or len(np.unique(hashes)) < len(hashes):
                con.execute("""CREATE OR REPLACE TEMP TABLE _new_skipped AS
                               SELECT s.* FROM _skipped s ANTI JOIN skipped_events e ON e.event_id = s.event_id
                               QUALIFY row_number() OVER (PARTITION BY s.event_id ORDER BY s."offset") = 1""")
                src = "_new_skipped"
                hashes = _hashes(con, f"SELECT hash(event_id) AS h FROM {src}")
            con.execute(_INSERT_SKIPPED.format(src=src))
            con.execute(_INSERT_DETAILS.format(src=src))
            if src != "_skipped":
                con.execute(f"DROP TABLE {src}")
            self._adding_skipped = hashes
        finally:
            con.unregister("_skipped")


    def _fingerprints(self) -> Fingerprints:
        """The fingerprints of the committed ids: every ``frame_captures.event_id`` and every
        ``frames.frame_id`` (one set: a frame id is its first capture's event id, apart from a frame
        first seen through a touch). One scan of each column, on the first batch of this connection."""
        if self._ids is None:
            self._ids = Fingerprints(np.unique(_hashes(
                self.con, "SELECT hash(event_id) AS h FROM frame_captures UNION ALL SELECT hash(frame_id) AS h FROM frames")))
        return self._ids

    def _apply_captures(self, batch: pa.Table) -> tuple[int, int]:
        """Insert the batch's captures whose event id is new and fold them into ``frames``.

        Idempotence by event id: a capture whose event id is already in ``frame_captures`` (a
        record projected again from another offset: a producer retry, a worker re-processing
        after a crash) or earlier in the batch (lower ``seq``) changes nothing. In the usual batch
        there is neither, and the Arrow batch is used as it is; otherwise the new captures are
        materialised first. Returns (new frames, new duplicate captures).

        Neither check scans a whole table in the usual batch: the exact semi join
        against ``frame_captures`` runs only when an event id's fingerprint is already held
        (:mod:`projections.frames.fingerprints`, over the event ids and frame ids committed: a
        repeat, the first capture of a frame first seen through a touch, or a collision), and the
        batch's frames already in ``frames`` are looked for among the rows of the last
        :data:`RECENT_BATCHES` batches first, accepted only when every frame id whose fingerprint
        is held was found there (frame ids are unique in ``frames``), else in the whole table.
        Either way the rows matched are the ones a full scan matches. A frame whose id has no held
        fingerprint cannot be in the table: the fold of those frames is inserted straight, without
        a temporary table, and only the held ones (a few per batch once batches reach frames of
        earlier ones: 26 of 41 batches of a 2M run) take the search and the merge.
        """
        con = self.con
        ids = self._fingerprints()
        con.register("_batch", batch)
        try:
            unique = pc.count_distinct(batch.column("event_id")).as_py() == batch.num_rows
            hashes = _hashes(con, "SELECT hash(event_id) AS h FROM _batch")
            seen = 0
            if ids.maybe(hashes).any():
                ((seen,),) = con.execute(
                    "SELECT count(*) FROM _batch b SEMI JOIN frame_captures fc ON fc.event_id = b.event_id").fetchall()
            src = "_batch"
            if seen or not unique:
                con.execute(
                    """CREATE OR REPLACE TEMP TABLE _new AS
                       SELECT b.* FROM _batch b ANTI JOIN frame_captures fc ON fc.event_id = b.event_id
                       QUALIFY row_number() OVER (PARTITION BY b.event_id ORDER BY b.seq) = 1"""
                )
                src = "_new"
                hashes = _hashes(con, "SELECT hash(event_id) AS h FROM _new")
            ((rows_before,),) = con.execute("SELECT count(*) FROM frames").fetchall()
            con.execute(_INSERT_CAPTURES.format(src=src))
            con.execute(_INSERT_DETAILS.format(src=src))
            frame_hashes = _hashes(con, f"SELECT DISTINCT hash(frame_id) AS h FROM {src}")
            held_mask = ids.maybe(frame_hashes)
            held = int(held_mask.sum())
            if held:  # some frames may be in the table already: those are found, then merged or inserted
                con.register("_held", pa.table({"h": pa.array(frame_hashes[held_mask], type=pa.uint64())}))
                if held < len(frame_hashes):  # the others are certainly new: their fold goes straight in
                    con.execute(f"INSERT INTO frames BY NAME {_FRAME_AGG.format(src=_held_rows(src, 'ANTI'))}")
                con.execute(f"CREATE OR REPLACE TEMP TABLE _agg AS {_FRAME_AGG.format(src=_held_rows(src, 'SEMI'))}")
                con.unregister("_held")
                ((held_ids,),) = con.execute("SELECT count(*) FROM _agg").fetchall()  # frame ids, not hashes: two may share one
                if self._find_frames(int(held_ids)):
                    con.execute(_MERGE_FRAMES)
                    con.execute("INSERT INTO frames BY NAME SELECT * FROM _agg ANTI JOIN _hit USING (frame_id)")
                else:
                    con.execute("INSERT INTO frames BY NAME SELECT * FROM _agg")
                con.execute("DROP TABLE _agg")
                con.execute("DROP TABLE IF EXISTS _hit")
            else:  # every frame is new (the usual batch): the fold goes straight into the table
                con.execute(f"INSERT INTO frames BY NAME {_FRAME_AGG.format(src=src)}")
            ((created, dups),) = con.execute(
                f"SELECT count(*) FILTER (WHERE NOT is_duplicate), count(*) FILTER (WHERE is_duplicate) FROM {src}").fetchall()
            if src == "_new":
                con.execute("DROP TABLE _new")
            self._marks = [*self._marks, int(rows_before)][-RECENT_BATCHES:]
            self._adding = (hashes, frame_hashes)
        except BaseException:
            with contextlib.suppress(duckdb.Error):  # an aborted transaction (out of memory) refuses even this: the first error goes on
                con.unregister("_batch")
                con.unregister("_held")
            raise
        con.unregister("_batch")
        return int(created), int(dups)

    def _find_frames(self, held: int) -> int:
        """Build ``_hit`` (rowid and the batch's aggregate of every ``frames`` row whose frame id
        is in ``_agg``) and return its row count; ``held``: how many frame ids ``_agg`` holds (the
        batch's frames whose id has a held fingerprint: every one in the table has).

        Rows are appended, so those written by the last batches have rowids at or above the row
        count before them; that range is joined first (a scan of its row groups only). It is the
        whole answer when it holds ``held`` frames, since a frame id is in at most one row.
        """
        con = self.con
        join = "CREATE OR REPLACE TEMP TABLE _hit AS SELECT f.rowid AS rid, a.* FROM frames f JOIN _agg a USING (frame_id)"
        if self._marks:
            con.execute(f"{join} WHERE f.rowid >= {int(self._marks[0])}")
            ((found,),) = con.execute("SELECT count(DISTINCT frame_id) FROM _hit").fetchall()
            if found == held:
                return held
        con.execute(join)
        ((hits,),) = con.execute("SELECT count(*) FROM _hit").fetchall()
        return int(hits)


def _column(values: Any, t: pa.DataType) -> pa.Array | pa.ChunkedArray:
    """A capture column as Arrow of type ``t``: an Arrow array as it is (cast when its type differs), else ``pa.array``.

    Raises:
        pyarrow.ArrowInvalid, pyarrow.ArrowTypeError: when a value does not fit ``t``.
    """
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return values if values.type == t else values.cast(t)
    return pa.array(values, type=t)


def _held_rows(src: str, join: str) -> str:
    """A subquery of ``src``'s rows whose frame id's fingerprint is in ``_held`` (``join="SEMI"``) or is not (``"ANTI"``)."""
    return f"(SELECT s.* FROM {src} s {join} JOIN _held ON hash(s.frame_id) = _held.h)"


def _hashes(con: duckdb.DuckDBPyConnection, sql: str) -> Hashes:
    """The ``h`` column (DuckDB ``hash()``, UBIGINT) of ``sql`` as a uint64 array."""
    col = con.execute(sql).fetchnumpy()["h"]
    return np.asarray(col, dtype=np.uint64)
