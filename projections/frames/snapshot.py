"""The projection's snapshot for readers: the copy ``<db>.snapshot``, its heartbeat, and how often to copy.

DuckDB lets no second process open a file a writer holds, even read-only (docs/design.md#projections), so the
writer (``hivestream project``, ``hivestream serve``) publishes a consistent copy now and then.
A copy reads the whole file, so its cost grows with the projection: :class:`SnapshotPacing` keeps
the copies to a bounded share of the writer's time (the gap after a copy is at least
``SNAPSHOT_GAP_PER_COPY_S`` times the copy's own duration) and publishes at once when a burst
ends, so a caught-up projection is readable one copy after its last write. A failed copy leaves
nothing behind (its ``.snapshot.tmp`` and that file's WAL are removed), and the next is tried after
a pause that doubles per failure in a row; a copy that would leave less than a reserve free on
its file system is not tried at all (:func:`snapshot_room`), so a snapshot never takes the disk
space the writer's log needs.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import duckdb

from projections.file_copy import HeldFileCopy
from projections.reading import heartbeat_path, snapshot_path

SNAPSHOT_GAP_PER_COPY_S = 9.0
"""Seconds of gap after a copy per second the copy took: copies take at most a tenth of the
writer's time while records keep coming (a 200,000-event projection copied every 2 s took ~40 %
of the projector's CPU in ``bench/bench_e2e.py``)."""


SNAPSHOT_RETRY_CAP_S = 120.0
"""Longest pause before the next copy after failed ones (seconds): the pause after ``k`` failures
in a row is ``max(1, every_s) * 2**k``, capped here (a full disk was retried every ~2 s, each try
writing megabytes into the space freed by the one before)."""

SNAPSHOT_RESERVE_BYTES = 64 << 20
"""Free space a copy must leave on its file system (bytes; on a file system smaller than ten times
this, a tenth of its size and at least :data:`SNAPSHOT_RESERVE_MIN_BYTES`), as the copy's
estimated size is counted by :func:`snapshot_room`: the writer's log and WAL on the same disk keep
at least this (serve's ``/healthz`` says ``disk_full`` below 4 MiB)."""

SNAPSHOT_RESERVE_MIN_BYTES = 8 << 20
"""The least reserve a copy leaves free, whatever the file system's size (bytes)."""

SNAPSHOT_WAL_SLACK_BYTES = 8 << 20
"""What a copy's own WAL may take beside its file while it is written (bytes; 4-6 MB seen)."""


class FramesProjectionLike(Protocol):
    """What publication needs of the file being written (a :class:`projections.projection_file.ProjectionFile`,
    or a projection opened on its own file): its path and connection."""

    @property
    def path(self) -> str:
        """The DuckDB file."""

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        """Its writing connection."""


class HoldingProjectionLike(FramesProjectionLike, Protocol):
    """What :func:`publish_idle_snapshot` needs besides: the byte copier of the file the writer holds."""

    @property
    def file_copy(self) -> HeldFileCopy:
        """The copier (:class:`projections.file_copy.HeldFileCopy`)."""


@dataclass
class SnapshotPacing:
    """When the next snapshot is due (pure; times in monotonic seconds).

    Args:
        every_s: least seconds between two snapshots (0: never).

    While records keep coming, the gap after a copy that took ``t`` seconds is
    ``max(every_s, SNAPSHOT_GAP_PER_COPY_S * t)`` (the same rule as Flink's
    ``execution.checkpointing.min-pause`` sized by the last checkpoint's duration). Once the
    stream is quiet (nothing polled, nothing being written), a copy is due at once if the last one
    was cut while records were in flight (the burst it was cut from has ended, and readers get
    its end now, not up to ``every_s`` later: one more copy per busy one at most), else
    ``every_s`` after the last. After ``k`` failed copies in a row (:meth:`failed`) the next is due
    ``min(SNAPSHOT_RETRY_CAP_S, max(1, every_s) * 2**k)`` after the last failure, quiet or not.
    """

    every_s: float
    _at: float = float("-inf")
    _gap: float = 0.0
    _cut_busy: bool = False
    failures: int = 0

    def due(self, now: float, *, quiet: bool) -> bool:
        """Whether a snapshot is due at ``now`` (``quiet``: the stream has nothing in flight)."""
        if self.every_s <= 0:
            return False
        if self.failures:
            return now - self._at >= self._gap
        if quiet and self._cut_busy:
            return True
        return now - self._at >= (self.every_s if quiet else max(self.every_s, self._gap))

    def published(self, started: float, took_s: float, *, quiet: bool = True) -> None:
        """A copy started at ``started`` took ``took_s`` seconds; ``quiet``: nothing was in flight when it started."""
        self._at = started + took_s
        self._gap = SNAPSHOT_GAP_PER_COPY_S * took_s
        self._cut_busy = not quiet
        self.failures = 0

    def failed(self, now: float) -> float:
        """A copy failed at ``now``; returns the pause (seconds) before the next is due."""
        self.failures += 1
        self._at = now
        self._gap = min(SNAPSHOT_RETRY_CAP_S, max(1.0, self.every_s) * 2.0 ** self.failures)
        self._cut_busy = False
        return self._gap


def snapshot_leftovers(db: str | Path) -> list[Path]:
    """The temporary files a copy of ``db`` writes before its rename: ``<db>.snapshot.tmp``, that
    file's DuckDB WAL, and the heartbeat's ``.tmp`` (they outlive a copy only when a process dies
    in it)."""
    tmp = Path(f"{snapshot_path(db)}.tmp")
    return [tmp, Path(f"{tmp}.wal"), Path(f"{heartbeat_path(db)}.tmp")]


def remove_snapshot_leftovers(db: str | Path) -> list[Path]:
    """Delete :func:`snapshot_leftovers` of ``db`` (call it only from the one writer of ``db``, with
    no copy running); returns the files deleted. Raises nothing (a file that cannot be deleted stays)."""
    gone = []
    for p in snapshot_leftovers(db):
        with contextlib.suppress(OSError):
            p.unlink()
            gone.append(p)
    return gone


@dataclass(frozen=True)
class Room:
    """Whether a copy of a database fits on the snapshot's file system.

    Attributes:
        ok: ``free_bytes - need_bytes >= reserve_bytes``, or the free space is unknown.
        need_bytes: the copy's estimated peak size (bytes).
        free_bytes: what the file system has free for this user (bytes; -1: unknown).
        reserve_bytes: what must stay free (bytes).
    """

    ok: bool
    need_bytes: int
    free_bytes: int
    reserve_bytes: int

    def line(self) -> str:
        """One line for a log: the figures in MiB."""
        return (f"{self.free_bytes / 2**20:,.0f} MiB free, a copy needs ~{self.need_bytes / 2**20:,.0f} MiB "
                f"and {self.reserve_bytes / 2**20:,.0f} MiB are kept for the log")


def snapshot_room(db: str | Path, reserve_bytes: int = SNAPSHOT_RESERVE_BYTES) -> Room:
    """Whether a snapshot of ``db`` fits beside it, leaving ``reserve_bytes`` free (a tenth of a
    smaller file system, at least :data:`SNAPSHOT_RESERVE_MIN_BYTES`, when that is less).

    The copy's size is estimated as the larger of the previous snapshot and the file with its WAL
    (a copy holds the same rows, compacted: 113 MiB for a 113 MiB file of 400,000 captures), plus
    :data:`SNAPSHOT_WAL_SLACK_BYTES` for the copy's own WAL. Raises nothing (unknown sizes count 0,
    an unknown free space lets the copy be tried).
    """
    def size(p: Path) -> int:
        try:
            return p.stat().st_size
        except OSError:
            return 0

    target = snapshot_path(db)
    need = max(size(target), size(Path(db)) + size(Path(f"{db}.wal"))) + SNAPSHOT_WAL_SLACK_BYTES
    try:
        st = os.statvfs(target.parent)
    except OSError:
        return Room(True, need, -1, reserve_bytes)
    free = st.f_bavail * st.f_frsize
    reserve = min(reserve_bytes, max(SNAPSHOT_RESERVE_MIN_BYTES, st.f_blocks * st.f_frsize // 10))
    return Room(free - need >= reserve, need, free, reserve)


def write_heartbeat(sink: FramesProjectionLike, checked_at_ms: int) -> None:
    """Record (atomically) that the projector was alive and caught up with its snapshot at
    ``checked_at_ms`` (epoch ms), so readers can tell an idle projector from a stuck one."""
    write_heartbeat_of(Path(sink.path), checked_at_ms)


def write_heartbeat_of(db: Path, checked_at_ms: int) -> None:
    """:func:`write_heartbeat` for the file ``db`` (``<db>.snapshot.heartbeat``).

    Raises:
        OSError: when the file cannot be written (its ``.tmp`` is removed).
    """
    target = heartbeat_path(db)
    tmp = Path(f"{target}.tmp")
    try:
        tmp.write_text(json.dumps({"checked_at_ms": checked_at_ms}))
        tmp.replace(target)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise


def publish_snapshot(sink: FramesProjectionLike, published_at_ms: int) -> Path:
    """Copy the projection into ``<db>.snapshot`` atomically, for readers while the writer runs.

    DuckDB lets no second process open a file a writer holds, even read-only (docs/design.md#projections), so
    the writer publishes a consistent copy (:func:`copy_snapshot` on a cursor of the sink's
    connection), stamps it with the time and the positions it covers (table ``snapshot_info``),
    and renames it over the previous snapshot, so a reader never sees a half-written file.

    Returns:
        The snapshot path.

    Raises:
        duckdb.Error, OSError: when the copy or the rename fails (the previous snapshot stays).
    """
    cur = sink.con.cursor()
    try:
        return copy_snapshot(cur, Path(sink.path), published_at_ms)
    finally:
        cur.close()


def _stamp(con: duckdb.DuckDBPyConnection, source: str, target: str, published_at_ms: int) -> None:
    """Write ``snapshot_info`` (published_at_ms, positions as JSON) into the database ``target`` (``""``:
    the one ``con`` uses), with the positions of ``source``'s ``positions`` and ``kb_positions`` tables (those it has), read in ``con``'s
    transaction: what readers check a snapshot's freshness and coverage against (projections/reading.py)."""
    name = source[:-1] if source else None  # the database's name: one pair of quotes off, doubled quotes single
    if name is not None and len(name) >= 2 and name[0] == name[-1] == '"':
        name = name[1:-1].replace('""', '"')
    tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() WHERE database_name = coalesce(?, current_database())",
                                        [name]).fetchall()}
    positions = [r for t in ("positions", "kb_positions") if t in tables  # a frames projection, a knowledge base projection or both
                 for r in con.execute(f"SELECT input, src_partition, next_offset FROM {source}{t} ORDER BY ALL").fetchall()]
    con.execute(f"CREATE TABLE {target}snapshot_info (published_at_ms BIGINT, positions VARCHAR)")
    con.execute(f"INSERT INTO {target}snapshot_info VALUES (?, ?)", [published_at_ms, json.dumps(positions)])


def publish_idle_snapshot(sink: HoldingProjectionLike, published_at_ms: int) -> Path:
    """:func:`publish_snapshot` for a writer with nothing in flight: checkpoint, then copy the file's bytes.

    ``COPY FROM DATABASE`` decodes and re-encodes every table, so each copy costs CPU in
    proportion to the whole projection (a 200,000-event projection: ~0.5 s, the tail of the end-to-end
    benchmark). When no transaction is open on the file and no other thread writes to it (the
    projector between two batches), ``CHECKPOINT`` moves every committed row from the WAL into the
    file, which then *is* a consistent database: it is copied as bytes through the sink's own
    descriptor (:class:`projections.file_copy.HeldFileCopy`, which keeps DuckDB's ``fcntl``
    lock), the copy is opened as a database of its own to add ``snapshot_info`` with the positions
    it holds, and renamed over the previous snapshot. A guard: should a WAL remain after
    the checkpoint (DuckDB 2.0 either checkpoints or raises ``TransactionException`` while another
    cursor has an open write transaction), the byte copy would miss its rows, so this then falls
    back to :func:`publish_snapshot`. Frequent checkpoints leave free blocks in the file, which the
    copy carries (a 200,000-event projection: ~7 % larger than ``run``'s file).

    Returns:
        The snapshot path.

    Raises:
        duckdb.Error, OSError: when the checkpoint, the copy or the rename fails (the previous
            snapshot stays; the partial copy is removed).
    """
    db = Path(sink.path)
    con = sink.con
    con.execute("CHECKPOINT")
    wal = Path(f"{db}.wal")
    if wal.exists() and wal.stat().st_size:
        return publish_snapshot(sink, published_at_ms)
    target = snapshot_path(db)
    tmp = Path(f"{target}.tmp")
    tmp.unlink(missing_ok=True)
    Path(f"{tmp}.wal").unlink(missing_ok=True)
    sink.file_copy.copy_to(tmp)
    try:
        snap = duckdb.connect(str(tmp))
        try:
            snap.execute("BEGIN TRANSACTION")
            _stamp(snap, "", "", published_at_ms)  # the copy's own positions: the file as checkpointed
            snap.execute("COMMIT")
            snap.execute("CHECKPOINT")
        finally:
            snap.close()
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)  # a failed publication leaves no copy taking disk space
        Path(f"{tmp}.wal").unlink(missing_ok=True)
        raise
    return target


def copy_snapshot(con: duckdb.DuckDBPyConnection, db: Path, published_at_ms: int) -> Path:
    """Copy the database ``con`` is connected to (the file ``db``) into ``<db>.snapshot``.

    The copy (``COPY FROM DATABASE``) and the positions it covers are read in one transaction, so
    a writer may go on committing on another cursor of the same database meanwhile (MVCC: the copy
    is the database as of its start, with exactly those positions). ``con`` must have no open
    transaction (a cursor of its own).

    Returns:
        The snapshot path.

    Raises:
        duckdb.Error, OSError: when the copy or the rename fails (the previous snapshot stays; the
            partial copy and its WAL are removed).
    """
    target = snapshot_path(db)
    tmp = Path(f"{target}.tmp")
    tmp_wal = Path(f"{tmp}.wal")
    tmp.unlink(missing_ok=True)
    tmp_wal.unlink(missing_ok=True)  # a stale WAL would be replayed into the new copy
    row = con.execute("SELECT current_database()").fetchone()
    main = str(row[0]).replace('"', '""') if row else "main"
    try:
        con.execute("DETACH DATABASE IF EXISTS _snap")  # left attached by a copy whose DETACH failed
        con.execute("ATTACH '{}' AS _snap".format(tmp.as_posix().replace("'", "''")))  # a path may hold a quote
        try:
            con.execute("BEGIN TRANSACTION")
            try:
                con.execute(f'COPY FROM DATABASE "{main}" TO _snap')
                _stamp(con, f'"{main}".', "_snap.", published_at_ms)
                con.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(duckdb.Error):
                    con.execute("ROLLBACK")
                raise
        finally:
            con.execute("DETACH _snap")
        tmp.replace(target)
    except BaseException:
        tmp.unlink(missing_ok=True)  # a failed copy leaves no file taking disk space
        tmp_wal.unlink(missing_ok=True)
        raise
    return target
