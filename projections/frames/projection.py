"""The frames projection: frames, captures, skipped events, details and dead letters, one transaction per batch.

A :class:`~projections.projection.Projection`: a crash (kill -9) at any moment either applies a
whole batch with its positions or none of it, and a re-delivered event (same event id) changes
nothing. The memory tool calls of the same events (:class:`~projections.frames.memory_calls.MemoryCallProjection`)
are written in the same transactions.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from projections.file_copy import HeldFileCopy
from projections.frames.dedup_state import load_since_sweep, load_state, write_since_sweep, write_state
from projections.frames.fingerprints import Fingerprints, Hashes
from projections.frames.memory_calls import MemoryCallProjection
from projections.frames.rows import CAPTURE_COLUMNS, capture_columns
from projections.frames.schema import DDL
from projections.projection import MetaMismatch, Projection
from streams.frames.capture import Skipped
from streams.frames.dedup import FrameEvent
from streams.memory_calls.tool_calls import MemoryToolCall
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


RECENT_BATCHES = 4  # a batch's frames already in the table are looked for first among the rows the last 4 batches wrote

CAPTURE_SCHEMA: tuple[tuple[str, pa.DataType], ...] = tuple(zip(CAPTURE_COLUMNS, (
    pa.string(), pa.string(), pa.bool_(), pa.string(), pa.string(), pa.string(), pa.string(), pa.string(), pa.string(),
    pa.string(), pa.string(), pa.string(), pa.int64(), pa.int64(), pa.int32(), pa.int64(), pa.int64(), pa.bool_(), pa.string(),
), strict=True))


@dataclass
class FramesBatch:
    """One batch of the frames projection.

    Attributes:
        captures: the capture columns (:data:`projections.frames.rows.CAPTURE_COLUMNS`, as
            :func:`projections.frames.rows.capture_columns`, :func:`projections.frames.decode.decode_frame_records`
            or :meth:`hivestream.embedded.blocks.BatchColumns.columns` make them: sequences of Python
            values or Arrow arrays, ``seq`` in processing order); ``None``: none.
        dead_letters: rejected records to record (idempotent on input/partition/offset/event id).
        state_changes: the dedup core's (keys set → frames list, keys deleted), stored with the rows
            (embedded runner), or ``None``.
        memory_calls: memory tool calls for ``memory_tool_calls`` (:class:`MemoryCallProjection`, in the same transaction).
        since_sweep: the dedup core's captures since its last sweep after the batch, stored with the
            state (:func:`projections.frames.dedup_state.write_since_sweep`); ``None``: not stored.
        skipped: valid events that are not turns, for ``skipped_events`` (idempotent on event id, as
            captures are; their details, like the captures', go to ``event_details``).
    """

    captures: Mapping[str, Sequence[Any]] | None = None
    dead_letters: Sequence[DeadLetter] = ()
    state_changes: tuple[Mapping[str, Any], Iterable[str]] | None = None
    memory_calls: Sequence[MemoryToolCall] = ()
    since_sweep: int | None = None
    skipped: Sequence[Skipped] = ()

    @classmethod
    def of_events(cls, frame_events: Iterable[FrameEvent], dead_letters: Sequence[DeadLetter] = (), **kw: Any) -> FramesBatch:
        """The batch of ``frame_events`` (created/touched, in processing order; :func:`capture_columns`), the other fields as given."""
        return cls(capture_columns(frame_events), dead_letters, **kw)


FramesApplied = tuple[int, int, int]
"""(new frames, new duplicate captures, new dead letters) of one batch; re-delivered event ids and
dead letters already recorded count in none."""


class FramesProjection(Projection[FramesBatch, FramesApplied]):
    """The frames projection (``frames``, ``frame_captures``, ``skipped_events``, ``event_details``,
    ``dead_letters``, ``dedup_state``; positions in ``positions``, settings in ``meta``) with the
    memory tool calls of the same events (:class:`MemoryCallProjection`) written in its transactions.

    One writer process per file (docs/design.md); made as :class:`projections.projection.Projection`
    is (a path opens the file with :class:`~projections.projection_file.ProjectionFile`'s memory
    limit and checkpoint threshold; ``hivestream run --jobs N`` passes ``threads=1``: its import
    processes hold the other cores, and DuckDB's second thread only competed with them).

    Raises:
        duckdb.IOException: when another process holds the file, or it is not a DuckDB file.
        duckdb.ParserException: for a memory limit DuckDB cannot read, or a negative one.
    """

    name = "frames"
    ddl = DDL
    positions_table = "positions"
    meta_table = "meta"
    meta_hint = "use a new --db file (or reprocess)"

    def __init__(self, path: str | Path, con: duckdb.DuckDBPyConnection | None = None, *, memory_limit: str | None = None,
                 threads: int | None = None) -> None:
        super().__init__(path, con, memory_limit=memory_limit, threads=threads)
        self.memory_calls = MemoryCallProjection(self.path, self.con)
        # fingerprints of frame_captures.event_id ∪ frames.frame_id (read on the first batch) and of
        # skipped_events.event_id (read on the first batch that has skipped events), and the frames
        # row counts before the last batches
        self._ids: Fingerprints | None = None
        self._skipped_ids: Fingerprints | None = None
        self._marks: list[int] = []

    @property
    def file_copy(self) -> HeldFileCopy:
        """The byte copier of the file this projection opened (snapshots).

        Raises:
            AttributeError: on a shared connection (the file's owner has the copier).
        """
        if self.file is None:
            raise AttributeError("file_copy: this projection shares a connection; the file's owner copies it")
        return self.file.file_copy

    # --- dedup state (embedded runner) ----------------------------------------------------
    def load_dedup_state(self) -> dict[str, Any]:
        """The dedup core's state as stored by the last committed batch (key → frames list; :func:`load_state`)."""
        return load_state(self.con)

    def load_since_sweep(self) -> int:
        """The dedup core's captures since its last sweep, as the last committed batch stored it (:func:`load_since_sweep`)."""
        return load_since_sweep(self.con)

    # --- the batch ------------------------------------------------------------------------
    def write(self, batch: FramesBatch) -> FramesApplied:
        """Write one batch's rows inside the caller's transaction (:meth:`apply` commits them with the positions).

        Returns:
            (new frames, new duplicate captures, new dead letters).

        Raises:
            duckdb.Error: on a database failure.
            pyarrow.ArrowInvalid, pyarrow.ArrowTypeError: when a column value does not fit its type (nothing is written).
        """
        con = self.con
        applied = (0, 0)
        if batch.captures is not None:
            table = pa.table({name: _column(batch.captures[name], t) for name, t in CAPTURE_SCHEMA})
            if table.num_rows:
                applied = self._apply_captures(table)
        if batch.skipped:
            self._apply_skipped(batch.skipped)
        new_dl = 0
        if batch.dead_letters:
            ((before,),) = con.execute("SELECT count(*) FROM dead_letters").fetchall()
            con.executemany(
                "INSERT INTO dead_letters VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                [[d.source, d.partition, d.offset, d.event_id, str(d.reason), d.detail, d.original(), d.time_ms] for d in batch.dead_letters],
            )
            ((after,),) = con.execute("SELECT count(*) FROM dead_letters").fetchall()  # fetchall: a result left open blocks register()
            new_dl = int(after) - int(before)
        self.memory_calls.write(batch.memory_calls)
        if batch.state_changes:
            write_state(con, *batch.state_changes)
        if batch.since_sweep is not None:
            write_since_sweep(con, batch.since_sweep)
        return applied[0], applied[1], new_dl

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
            self._skipped_ids.add(hashes)  # before the commit: a fingerprint of an id not committed only costs an exact check
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
            ids.add(np.union1d(hashes, frame_hashes))  # before the commit, as in _apply_skipped
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


"""The frames projection's earlier name."""

__all__ = ["CAPTURE_SCHEMA", "SKIPPED_SCHEMA", "FramesApplied", "FramesBatch", "FramesProjection", "MetaMismatch"]
